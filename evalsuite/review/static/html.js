// HTML in a shadow root with the review styles (evalsuite/review/desk.py HtmlView): JupyterLab's
// CSS (fixed table layout, right-aligned cells) cannot reach the diffs and tables inside.
function render({ model, el }) {
  const shadow = el.attachShadow({ mode: "open" });
  const style = document.createElement("style");
  style.textContent = model.get("_style");
  const box = document.createElement("div");
  box.className = "evs-html";
  shadow.append(style, box);
  const draw = () => { box.innerHTML = model.get("html"); };
  model.on("change:html", draw);
  draw();
}
export default { render };
