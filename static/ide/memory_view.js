// Core memory in view. From 1200 px the agent's blocks have their own column beside the conversation (#memory-pane)
// while the conversation keeps 360 px; narrower, or when dragged side panes leave no room, the same panel is the
// inspector's Memory tab (main[data-memory] says which). A block that a run, another tab or the API changed is drawn
// again by the server (memory/_block_card.html, with its change: a diff and the tool call that made it) and flashes;
// "show the call" brings that call into view in the conversation, or opens its step when the page does not hold it.
(function () {
  "use strict";
  const $ = (sel, root) => (root || document).querySelector(sel);
  const main = $("main.workspace");
  const pane = $("#memory-pane"), tab = $("#tab-memory"), panel = $("#blocks-panel");
  if (!main || !pane || !tab || !panel) return;
  const settings = $("#settings-pane"), inspector = $("#inspector");
  const roomy = matchMedia("(min-width: 1200px)"), wide = matchMedia("(min-width: 1280px)");
  const phone = matchMedia("(max-width: 767.98px)");
  const CENTER_MIN = 360, SPLITTER = 5;
  const memWidth = () => Math.min(380, Math.max(240, window.innerWidth * 0.19));  // --mem-w in memory_view.css

  // ---- where the blocks are: their column, or the Memory tab
  function fits() {
    if (!roomy.matches) return false;
    let sides = settings.getBoundingClientRect().width + SPLITTER;
    if (wide.matches) sides += inspector.getBoundingClientRect().width + SPLITTER;
    return main.clientWidth - sides - memWidth() >= CENTER_MIN;
  }
  function selectTab(id) { const b = $(`.pill-nav [data-tab="${id}"]`); if (b) b.click(); }
  function place() {
    const mode = fits() ? "column" : "tab";
    if (main.dataset.memory === mode) return;
    const wasMemoryTab = !tab.hidden;
    main.dataset.memory = mode;
    (mode === "column" ? pane : tab).appendChild(panel);
    const pill = $('.pill-nav [data-tab="tab-memory"]');
    if (pill) pill.title = mode === "column" ? "Core memory is in its own column beside the conversation: this brings it into view" : "";
    if (mode === "column" && wasMemoryTab) selectTab("tab-context");  // its panel now lives in the column
  }
  place();
  roomy.addEventListener("change", place);
  wide.addEventListener("change", place);
  if (window.ResizeObserver) {
    const ro = new ResizeObserver(() => place());
    [main, settings, inspector].forEach((n) => ro.observe(n));
  } else window.addEventListener("resize", place);

  // In the column, the Memory tab (and what opens it, e.g. a pause card's "Edit a memory block") points to the column.
  function flash(node) {
    node.classList.remove("flash");
    void node.offsetWidth;  // restart the animation
    node.classList.add("flash");
  }
  document.addEventListener("click", (e) => {
    if (main.dataset.memory !== "column") return;
    const opener = e.target.closest && e.target.closest('[data-tab="tab-memory"], [data-open-tab="tab-memory"]');
    if (!opener) return;
    e.preventDefault();
    e.stopPropagation();
    const target = (opener.dataset.scroll && $(opener.dataset.scroll)) || panel;
    target.scrollIntoView({block: "start"});
    flash(target);
    clearMarks();
  }, true);

  // ---- a dot on what opens the Memory tab while a change there is out of sight
  const markers = () => [$('.pill-nav [data-tab="tab-memory"]'), $("#inspector-toggle"), $('.ws-tabs [data-pane="inspector"]')].filter(Boolean);
  function clearMarks() { markers().forEach((m) => m.removeAttribute("data-memory-changed")); }
  function panelInSight() {
    const r = panel.getBoundingClientRect();
    return panel.checkVisibility ? panel.checkVisibility({visibilityProperty: true}) && r.width > 0 && r.right > 0 && r.left < window.innerWidth
      : r.width > 0;
  }
  if (window.IntersectionObserver) new IntersectionObserver((es) => { if (es.some((x) => x.isIntersecting)) clearMarks(); }).observe(panel);
  document.addEventListener("click", (e) => { if (e.target.closest && e.target.closest('.pill-nav [data-tab="tab-memory"]')) clearMarks(); });

  // ---- live: the server draws the changed card again (newest wins; an edit in progress is never thrown away)
  const version = (card) => parseInt(card.dataset.version || "0", 10);
  const cardOf = (id) => $(`.block-card[data-block-id="${CSS.escape(id)}"]`);
  function editing(card) {
    const ta = card.querySelector("textarea[name=value]");
    return card.dataset.dirty === "1" && (document.activeElement === ta || card.contains(document.activeElement));
  }
  function refresh(b, fallback) {
    const card = cardOf(b.id);
    if (!card || !card.dataset.cardUrl) { fallback(b); return; }
    if (version(card) >= b.version) return;  // this tab's own save already shows it
    if (editing(card)) { fallback(b); return; }  // says "changed elsewhere" on the card
    fetch(card.dataset.cardUrl + "?live=1", {credentials: "same-origin", headers: {"HX-Request": "true"}})
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        const box = document.createElement("template");
        box.innerHTML = html;  // server-rendered, autoescaped
        const fresh = box.content.querySelector(".block-card");
        const now = cardOf(b.id);
        if (!fresh || !now || version(fresh) <= version(now)) return;  // a newer card got here first
        if (editing(now)) { fallback(b); return; }
        now.replaceWith(fresh);
        if (window.htmx) htmx.process(fresh);
        if (!panelInSight()) markers().forEach((m) => m.setAttribute("data-memory-changed", ""));
      })
      .catch(() => fallback(b));  // at least the value: the base update writes it into the card
  }
  const blocks = window.AIDE_BLOCKS;
  if (blocks && blocks.update) {
    const base = blocks.update.bind(blocks);
    blocks.update = (b) => refresh(b, base);
  }

  // ---- "show the call": the tool call in the conversation, else its step in the inspector
  function findCall(id) {
    const marked = $(`#conversation .msg.tool_call_message[data-call-id="${CSS.escape(id)}"]`);
    if (marked) return marked;
    for (const a of document.querySelectorAll("#conversation .msg.tool_call_message a.open-workbench")) {
      try { if (new URL(a.href, location.href).searchParams.get("call") === id) return a.closest(".msg"); } catch (e) { /* not a URL */ }
    }
    return null;
  }
  function highlight(node) {
    node.classList.remove("call-highlight");
    void node.offsetWidth;
    node.classList.add("call-highlight");
    node.scrollIntoView({block: "center"});
    if (!node.hasAttribute("tabindex")) node.setAttribute("tabindex", "-1");
    node.focus({preventScroll: true});
  }
  function highlightInStep(id) {  // once the step inspector shows the step, point at this call's result in it
    const done = (e) => {
      if (e.target.id !== "step-detail") return;
      document.body.removeEventListener("htmx:afterSwap", done);
      const li = $(`#step-detail .step-tool[data-call-id="${CSS.escape(id)}"]`);
      if (li) highlight(li);
    };
    document.body.addEventListener("htmx:afterSwap", done);
  }
  function showCall(id, chip) {
    const node = findCall(id);
    if (node) {
      // what covers the conversation goes: a phone shows one pane at a time, a drawer lies over it
      if (phone.matches) { const t = $('.ws-tabs [data-pane="conversation"]'); if (t) t.click(); }
      if (document.body.classList.contains("inspector-open")) { const x = $("#inspector-close"); if (x) x.click(); }
      highlight(node);
      return;
    }
    if (chip) { highlightInStep(id); chip.click(); }  // an older page or another conversation: the step shows it
  }
  document.addEventListener("click", (e) => {
    const link = e.target.closest && e.target.closest("a.bc-call[data-call]");
    if (!link) return;
    e.preventDefault();
    showCall(link.dataset.call, link.closest(".block-change").querySelector(".step-chip[data-step]"));
  });

  // a link to a call (a block's history: #step=…&call=…) shows it in the conversation and in its step
  const linked = new URLSearchParams(location.hash.slice(1)).get("call");
  if (linked) {
    if (new URLSearchParams(location.hash.slice(1)).get("step")) highlightInStep(linked);
    document.addEventListener("DOMContentLoaded", () => { const n = findCall(linked); if (n) highlight(n); });
  }
})();
