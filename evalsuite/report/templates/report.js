// Filters (variant, scenario, flagged only) and case navigation; no server, no network.
(function () {
  "use strict";
  var fv = document.getElementById("f-variant");
  var fs = document.getElementById("f-scenario");
  var ff = document.getElementById("f-flagged");
  var count = document.getElementById("flagged-visible");

  function matches(el) {
    var d = el.dataset;
    if (fv.value && d.variant !== undefined && d.variant !== fv.value) return false;
    if (fs.value && d.scenario !== undefined && d.scenario !== "" && d.scenario !== fs.value) return false;
    if (ff.checked && d.flagged !== undefined && d.flagged !== "1") return false;
    return true;
  }

  function apply() {
    var els = document.querySelectorAll("[data-filter]");
    for (var i = 0; i < els.length; i++) els[i].hidden = !matches(els[i]);
    var cards = document.querySelectorAll("details.case");
    var shown = 0;
    for (var j = 0; j < cards.length; j++) if (!cards[j].hidden) shown++;
    if (count) count.textContent = String(shown);
    var params = [];
    if (fv.value) params.push("variant=" + encodeURIComponent(fv.value));
    if (fs.value) params.push("scenario=" + encodeURIComponent(fs.value));
    if (ff.checked) params.push("flagged=1");
    var state = params.length ? "?" + params.join("&") : "";
    try { history.replaceState(null, "", location.pathname + state + location.hash); } catch (e) { /* file:// in some browsers */ }
  }

  function restore() {
    var q = location.search.replace(/^\?/, "").split("&");
    for (var i = 0; i < q.length; i++) {
      var kv = q[i].split("=");
      var val = decodeURIComponent(kv[1] || "");
      if (kv[0] === "variant") fv.value = val;
      if (kv[0] === "scenario") fs.value = val;
      if (kv[0] === "flagged") ff.checked = val === "1";
    }
  }

  function openTarget() {
    if (!location.hash) return;
    var el = document.getElementById(location.hash.slice(1));
    if (el && el.tagName === "DETAILS") el.open = true;
  }

  fv.addEventListener("change", apply);
  fs.addEventListener("change", apply);
  ff.addEventListener("change", apply);
  window.addEventListener("hashchange", openTarget);
  var ex = document.getElementById("expand-all");
  var co = document.getElementById("collapse-all");
  function setAll(open) {
    var cards = document.querySelectorAll("details.case");
    for (var i = 0; i < cards.length; i++) if (!cards[i].hidden) cards[i].open = open;
  }
  if (ex) ex.addEventListener("click", function () { setAll(true); });
  if (co) co.addEventListener("click", function () { setAll(false); });

  // n / p: next / previous visible flagged case
  document.addEventListener("keydown", function (ev) {
    if (ev.target && /INPUT|SELECT|TEXTAREA/.test(ev.target.tagName)) return;
    if (ev.key !== "n" && ev.key !== "p") return;
    var cards = Array.prototype.filter.call(document.querySelectorAll("details.case"), function (c) { return !c.hidden; });
    if (!cards.length) return;
    var cur = cards.findIndex(function (c) { return c.getBoundingClientRect().top > 60; });
    if (cur < 0) cur = cards.length;
    var target = ev.key === "n" ? cards[Math.min(cur, cards.length - 1)] : cards[Math.max(cur - 2, 0)];
    target.open = true;
    target.scrollIntoView({ block: "start" });
  });

  restore();
  apply();
  openTarget();
})();
