// The review panel's front end (an anywidget module). Python (evalsuite/review/desk.py) decides
// everything and sends ready HTML; this file lays it out in a shadow root (so JupyterLab's CSS cannot
// reach it), turns keys and clicks into messages, and keeps the keys it handles away from JupyterLab
// (a letter typed over the panel must never insert or delete a notebook cell).

const HELP = `<b>keys</b> (click the panel first)<br>
verdict keys (shown on the buttons) record at once, with the note if you wrote one<br>
<kbd>Shift</kbd>+verdict key: choose it and write a note; <kbd>Enter</kbd> records it<br>
<kbd>n</kbd> note · <kbd>Enter</kbd> in the note: record the chosen verdict · <kbd>Esc</kbd> leave the note<br>
<kbd>s</kbd> skip · <kbd>z</kbd> undo your last verdict · <kbd>b</kbd> back to the item before<br>
<kbd>[</kbd> <kbd>]</kbd> previous / next tab · <kbd>?</kbd> this help`;

function h(tag, cls, html) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (html !== undefined) e.innerHTML = html;
  return e;
}

function matches(b, e) {
  const k = (e.key || "").toLowerCase();
  return k === b.key || e.code === "Digit" + b.key || e.code === "Key" + b.key.toUpperCase();
}

function render({ model, el }) {
  const shadow = el.attachShadow({ mode: "open" });
  const style = h("style");
  style.textContent = model.get("_style");
  const root = h("div", "evs-desk");
  root.tabIndex = 0;
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", "review panel: press ? for the keys");
  root.innerHTML = `<div class="top"><div class="header"></div><div class="progress"></div></div>
    <div class="reasons-box"></div>
    <div class="main"><div class="diff"></div><div class="side"><div class="tabs" role="tablist"></div><div class="tabbody"></div></div></div>
    <div class="bar"><input class="note" type="text" aria-label="note"><select class="expires" aria-label="waiver expires"></select><span class="btns"></span><div class="status" role="status"></div></div>
    <div class="help" hidden></div>`;
  shadow.append(style, root);
  const q = (s) => root.querySelector(s);
  const note = q(".note");
  q(".help").innerHTML = HELP;
  let pending = false;
  let armed = null;
  let tab = null;
  let shownItem = null;

  function drawTabs() {
    const tabs = model.get("tabs") || [];
    if (!tabs.some((t) => t.id === tab)) tab = model.get("tab") || (tabs[0] && tabs[0].id);
    const bar = q(".tabs");
    bar.replaceChildren();
    for (const t of tabs) {
      const b = h("button", t.id === tab ? "on" : "", t.title);
      b.setAttribute("role", "tab");
      b.dataset.tab = t.id;
      b.addEventListener("click", () => { tab = t.id; drawTabs(); });
      bar.append(b);
    }
    const cur = tabs.find((t) => t.id === tab);
    q(".tabbody").innerHTML = cur ? cur.html : "";
  }

  function drawButtons() {
    const box = q(".btns");
    box.replaceChildren();
    for (const b of model.get("buttons") || []) {
      const btn = h("button", b.cls + (armed && armed.value === b.value && armed.action === b.action ? " armed" : ""), `${b.label}<kbd>${b.key}</kbd>`);
      btn.dataset.action = b.action;
      btn.dataset.value = b.value || "";
      btn.title = b.title || "";
      btn.disabled = pending || (b.needs_item && !model.get("item_id")) || (b.enabled === false);
      btn.addEventListener("click", () => act(b));
      box.append(btn);
    }
    const sel = q(".expires");
    const keep = sel.value;
    sel.replaceChildren(...(model.get("expiry_options") || []).map(([v, label]) => { const o = h("option", "", label); o.value = v; return o; }));
    if (keep) sel.value = keep;
    sel.hidden = !(model.get("expiry_options") || []).length;
    note.placeholder = armed ? `why "${armed.label}"? Enter records it, Esc cancels` : "note (why) - n to write, Enter to record the chosen verdict";
  }

  function draw() {
    const itemId = model.get("item_id");
    if (itemId !== shownItem) {
      shownItem = itemId;
      tab = null;
      armed = null;
      note.value = "";
    }
    q(".header").innerHTML = model.get("header");
    q(".progress").innerHTML = model.get("progress");
    q(".reasons-box").innerHTML = model.get("reasons");
    q(".reasons-box").hidden = !model.get("reasons");
    q(".diff").innerHTML = model.get("diff");
    const st = q(".status");
    st.textContent = model.get("status");
    st.className = "status " + (model.get("status_kind") || "");
    drawTabs();
    drawButtons();
  }

  function act(b) {
    if (pending) return;
    if (b.needs_item && !model.get("item_id")) return;
    pending = true;
    const msg = { action: b.action, value: b.value || null, note: note.value, expires: q(".expires").value || null };
    armed = null;
    drawButtons();
    if (shadow.activeElement === note) root.focus({ preventScroll: true }); // the keys work again at once
    model.send(msg);
  }

  function arm(b) {
    armed = b;
    drawButtons();
    note.focus();
  }

  function hint(text) {
    const st = q(".status");
    st.textContent = text;
    st.className = "status";
  }

  note.addEventListener("keydown", (e) => {
    e.stopPropagation(); // typing a note is typing, never a notebook shortcut
    if (e.key === "Enter") {
      e.preventDefault();
      if (armed) act(armed);
      else { hint("note kept: now press the verdict key (it records the verdict with this note)"); root.focus(); }
    } else if (e.key === "Escape") {
      e.preventDefault();
      armed = null;
      drawButtons();
      root.focus();
    }
  });

  root.addEventListener("keydown", (e) => {
    if (e.target === note || e.target.tagName === "SELECT") { e.stopPropagation(); return; }
    if (e.ctrlKey || e.metaKey || e.altKey) return; // JupyterLab's own shortcuts (Ctrl+S, ...) pass
    const buttons = model.get("buttons") || [];
    const b = buttons.find((x) => matches(x, e));
    let handled = true;
    if (b && e.shiftKey && b.note) arm(b);
    else if (b && !e.shiftKey) act(b);
    else if (e.key === "Enter" && armed) act(armed);
    else if (e.key === "n") { e.preventDefault(); note.focus(); }
    else if (e.key === "[" || e.key === "]") {
      const tabs = model.get("tabs") || [];
      const i = tabs.findIndex((t) => t.id === tab);
      const next = tabs[(i + (e.key === "]" ? 1 : tabs.length - 1)) % tabs.length];
      if (next) { tab = next.id; drawTabs(); }
    } else if (e.key === "?") q(".help").hidden = !q(".help").hidden;
    else if (e.key === "Escape") { armed = null; q(".help").hidden = true; drawButtons(); }
    else handled = e.key.length === 1; // any other character: swallowed, so JupyterLab never sees it
    if (handled) { e.preventDefault(); e.stopPropagation(); }
  });

  model.on("change:serial", () => {
    pending = false;
    draw();
    if (!shadow.activeElement || shadow.activeElement === root) root.focus({ preventScroll: true });
  });
  for (const name of ["header", "progress", "reasons", "diff", "tabs", "buttons", "status"]) {
    model.on(`change:${name}`, () => { if (!pending) draw(); });
  }
  draw();
  // the panel is where the work is: bring it into view and take the keys when it first appears
  if (model.get("autofocus")) setTimeout(() => { root.scrollIntoView({ block: "nearest" }); root.focus({ preventScroll: true }); }, 200);
}

export default { render };
