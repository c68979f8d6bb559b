// Agent workspace, inspector side: tabs, the window slider, payload views (parts or raw JSON, remembered: ide.css
// reads html[data-payload]), step chips and the runs table's rows.
(function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const $ = (sel) => document.querySelector(sel);
  const UI = window.AIDE_UI, store = UI.store;  // layout.js
  document.documentElement.dataset.payload = store.get("aide-payload-raw", false) ? "raw" : "parts";

  // ---- tabs
  function openTab(id) {
    document.querySelectorAll(".pill-nav [data-tab]").forEach((b) => {
      b.setAttribute("aria-selected", b.dataset.tab === id ? "true" : "false");
      document.getElementById(b.dataset.tab).hidden = b.dataset.tab !== id;
    });
    if (id === "tab-archival") htmx.trigger("#tab-archival", "intersect");
    store.set("aide-tab", id);
  }
  const savedTab = store.get("aide-tab", "tab-context");
  if (savedTab !== "tab-context" && document.getElementById(savedTab)) openTab(savedTab);

  // ---- context window slider: re-scale the breakdown from the section token counts while dragging (no write)
  function applyWindow() {
    const slider = $("#window-slider"), ctx = $("#ctx");
    if (!slider || !ctx) return;
    const limit = parseInt(slider.value, 10), total = parseInt(ctx.dataset.total, 10), fixed = parseInt(ctx.dataset.fixed, 10);
    const number = $("#window-number"), warn = $("#window-fixed-warn"), tooSmall = fixed + 256 > limit;
    if (number && document.activeElement !== number) number.value = limit;
    if (warn) {  // what the save would refuse, said while dragging (core.web.workspace.WINDOW_ROOM)
      warn.hidden = !tooSmall;
      warn.textContent = tooSmall ? `Too small: the system prompt, memory blocks and tool definitions alone take ${fixed} tokens, leaving no room for a message. Saving needs at least ${fixed + 256}.` : "";
    }
    $("#window-value").textContent = $("#ctx-limit").textContent = limit;
    $("#ctx-pct").textContent = (100 * total / limit).toFixed(1);
    $("#ctx-free").textContent = limit - total;
    ctx.querySelectorAll("#ctx-bar span[data-tokens]").forEach((s) => { s.style.width = (100 * s.dataset.tokens / limit) + "%"; });
    ctx.querySelectorAll("#ctx-table td.pct").forEach((td) => { td.textContent = (100 * td.dataset.tokens / limit).toFixed(2) + "%"; });
    $("#ctx-bar").classList.toggle("over", total > limit);
    const saved = parseInt(ctx.dataset.limit, 10);
    // the saved limit has its own note; a window the fixed part fills has the slider's
    $("#ctx-over-live").hidden = !(total > limit) || limit === saved || tooSmall;
    const note = $("#unsaved-note"); if (note) note.hidden = limit === saved;
  }
  document.addEventListener("input", (e) => {
    if (e.target.id === "window-slider") applyWindow();
    if (e.target.id === "window-number") {  // the number field moves the slider (a value out of range waits)
      const slider = $("#window-slider"), v = parseInt(e.target.value, 10);
      if (slider && v >= parseInt(slider.min, 10) && v <= parseInt(slider.max, 10)) { slider.value = v; applyWindow(); }
    }
  });
  document.addEventListener("change", (e) => {  // leaving the number field: it shows what the slider holds
    if (e.target.id === "window-number") { e.target.value = $("#window-slider").value; applyWindow(); }
  });
  // the slider's keys move by a useful amount: 1% of its range (10% with Page Up/Down) in whole 256-token steps,
  // not the 1 token its step="1" gives (kept so the number field can set any value)
  const SLIDER_KEYS = {ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1, PageUp: 10, PageDown: -10};
  document.addEventListener("keydown", (e) => {
    if (e.target.id !== "window-slider" || !(e.key in SLIDER_KEYS) || e.altKey || e.ctrlKey || e.metaKey) return;
    const s = e.target, min = parseInt(s.min, 10), max = parseInt(s.max, 10);
    const unit = Math.max(256, Math.round((max - min) / 100 / 256) * 256);
    const next = Math.min(max, Math.max(min, parseInt(s.value, 10) + SLIDER_KEYS[e.key] * unit));
    e.preventDefault();
    if (next === parseInt(s.value, 10)) return;
    s.value = next;
    ["input", "change"].forEach((n) => s.dispatchEvent(new Event(n, {bubbles: true})));
  });

  document.body.addEventListener("htmx:afterSwap", (e) => { if (["context-panel", "settings-form"].includes(e.target.id)) applyWindow(); });

  // scroll the inspector so `target` starts just below its tab strip (which stays in view: it is sticky)
  function showBelowTabs(target) {
    const pane = target.closest("#inspector");
    const head = pane && pane.querySelector(":scope > .inspector-head");
    if (!pane || !head) { target.scrollIntoView({block: "start"}); return; }
    pane.scrollTop += target.getBoundingClientRect().top - head.getBoundingClientRect().bottom - 6;
  }

  function openStep(stepId, call) {  // call: a tool call to point at in the step (the server marks it data-reveal)
    openTab("tab-context");
    const url = A.stepUrl.replace("STEP", encodeURIComponent(stepId)) + (call ? "?call=" + encodeURIComponent(call) : "");
    htmx.ajax("GET", url, {target: "#step-detail"})
      .then(() => { const d = $("#step-detail"); if (d) showBelowTabs(d); });
    document.querySelectorAll(".step-chip").forEach((c) => c.classList.toggle("active", c.dataset.step === stepId));
  }

  // a button elsewhere opens an inspector tab and shows one part of it (data-open-tab, data-scroll)
  function openFrom(opener) {
    openTab(opener.dataset.openTab);
    UI.showInspector();
    const target = opener.dataset.scroll ? $(opener.dataset.scroll) : null;
    if (target) { showBelowTabs(target); UI.flash(target); }
  }

  // ---- clicks: tabs, step chips, payload toggles, runs
  document.addEventListener("click", (e) => {
    const c = (sel) => e.target.closest(sel);
    if (c(".pill-nav [data-tab]")) { openTab(c(".pill-nav [data-tab]").dataset.tab); return; }
    const chip = c(".step-chip[data-step]");
    if (chip) { e.preventDefault(); openStep(chip.dataset.step); return; }
    // a node of a run's graph or a row of its timeline: this agent's steps open here, another agent's in its page
    const node = c("[data-open-step]");
    if (node && !e.ctrlKey && !e.metaKey && !e.shiftKey) { e.preventDefault(); openStep(node.dataset.openStep, node.dataset.call); return; }
    const opener = c("[data-open-tab]");  // e.g. a pause card's "Show the compiled request"
    if (opener && document.getElementById(opener.dataset.openTab)) { openFrom(opener); return; }
    if (c("[data-toggle-raw]")) {
      const raw = document.documentElement.dataset.payload !== "raw";
      document.documentElement.dataset.payload = raw ? "raw" : "parts";
      store.set("aide-payload-raw", raw);
      return;
    }
    const expand = c("[data-expand-parts]");
    if (expand) {
      const parts = expand.closest(".payload-view").querySelectorAll("details.part");
      const open = !Array.from(parts).every((d) => d.open);
      parts.forEach((d) => { d.open = open; });
      expand.textContent = open ? "Collapse all" : "Expand all";
      return;
    }
    if (c("[data-close-step]")) { $("#step-detail").textContent = ""; return; }
    if (c("[data-close-diff]")) { $("#version-diff").textContent = ""; return; }
    // runs table: a click on a run shows its steps (its checkbox, which the table's refresh keeps: core/_runs.html)
    if (c(".run-main") && !c("a, button, input")) c(".run-main").querySelector(".run-toggle").click();
  });
  // ---- keyboard: arrow keys (Home, End) move between the tabs of a tab list; Esc closes an open step
  document.addEventListener("keydown", (e) => {
    const tab = e.target.closest && e.target.closest("[role=tablist] > [role=tab]");
    if (tab && ["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) {
      const tabs = Array.from(tab.parentElement.querySelectorAll(":scope > [role=tab]")).filter((t) => t.offsetParent !== null);
      const i = tabs.indexOf(tab), n = tabs.length;
      const next = tabs[e.key === "Home" ? 0 : e.key === "End" ? n - 1 : (i + (e.key === "ArrowRight" ? 1 : -1) + n) % n];
      if (next && next !== tab) { e.preventDefault(); next.focus(); next.click(); }
      return;
    }
    if (e.key === "Escape" && !e.defaultPrevented && !e.target.closest("input, textarea, select, [contenteditable]")) {
      const step = $("#step-detail");
      if (step && step.childElementCount) { step.textContent = ""; e.preventDefault(); }  // the drawer stays: a second Esc
    }
  }, true);

  applyWindow();
  // A link to a step of this agent opens it: ?step=ID (where an agent test went wrong, on its kept copy) or
  // #step=ID&call=ID (a block history entry: the step that made the change). htmx is deferred.
  const hash = new URLSearchParams(location.hash.slice(1));
  const linkedStep = new URLSearchParams(location.search).get("step") || hash.get("step");
  if (linkedStep) document.addEventListener("DOMContentLoaded", () => openStep(linkedStep, hash.get("call")));
})();
