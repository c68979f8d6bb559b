// Core memory in view. From 1200 px the agent's blocks have their own column beside the conversation (#memory-pane)
// while the conversation keeps 360 px; narrower, or when dragged side panes leave no room, the same panel is the
// inspector's Memory tab (main[data-memory] says which). A block that a run, another tab or the API changed is drawn
// again by the server (memory/_block_card.html, with its change: a diff and the tool call that made it) and flashes;
// "show the call" brings that call into view in the conversation, or opens its step when the page does not hold it.
// Each card counts its characters against its limit as the person types.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const main = $("main.workspace");
  const pane = $("#memory-pane"), tab = $("#tab-memory"), panel = $("#blocks-panel");
  if (!main || !pane || !tab || !panel) return;
  const settings = $("#settings-pane"), inspector = $("#inspector");
  const roomy = matchMedia("(min-width: 1200px)"), wide = matchMedia("(min-width: 1280px)");
  const CENTER_MIN = 360, SPLITTER = 5;
  const memWidth = () => Math.min(380, Math.max(240, window.innerWidth * 0.19));  // --mem-w in memory_view.css

  // ---- where the blocks are: their column, or the Memory tab
  function fits() {
    if (!roomy.matches) return false;
    let sides = settings.getBoundingClientRect().width + SPLITTER;
    if (wide.matches) sides += inspector.getBoundingClientRect().width + SPLITTER;
    return main.clientWidth - sides - memWidth() >= CENTER_MIN;
  }
  function place() {
    const mode = fits() ? "column" : "tab";
    if (main.dataset.memory === mode) return;
    const wasMemoryTab = !tab.hidden;
    main.dataset.memory = mode;
    (mode === "column" ? pane : tab).appendChild(panel);
    const pill = $('.pill-nav [data-tab="tab-memory"]');
    if (pill) pill.title = mode === "column" ? "Core memory is in its own column beside the conversation: this brings it into view" : "";
    if (mode === "column" && wasMemoryTab) $('.pill-nav [data-tab="tab-context"]').click();  // its panel now lives in the column
  }
  place();
  const ro = new ResizeObserver(place);  // the window, and side panes dragged wider, change what the middle has
  [main, settings, inspector].forEach((n) => ro.observe(n));

  // In the column, the Memory tab (and what opens it, e.g. a pause card's "Edit a memory block") points to the column.
  document.addEventListener("click", (e) => {
    const opener = e.target.closest && e.target.closest('[data-tab="tab-memory"], [data-open-tab="tab-memory"]');
    if (opener && (opener.matches(".pill-nav *") || main.dataset.memory === "column")) clearMarks();
    if (!opener || main.dataset.memory !== "column") return;
    e.preventDefault();
    e.stopPropagation();
    const target = (opener.dataset.scroll && $(opener.dataset.scroll)) || panel;
    target.scrollIntoView({block: "start"});
    window.AIDE_UI.flash(target);
  }, true);

  // ---- a dot on what opens the Memory tab while a change there is out of sight
  const markers = () => [$('.pill-nav [data-tab="tab-memory"]'), $("#inspector-toggle"), $('.ws-tabs [data-pane="inspector"]')].filter(Boolean);
  function clearMarks() { markers().forEach((m) => m.removeAttribute("data-memory-changed")); }
  function panelInSight() {
    const r = panel.getBoundingClientRect();
    return panel.checkVisibility({visibilityProperty: true}) && r.width > 0 && r.right > 0 && r.left < window.innerWidth;
  }
  new IntersectionObserver((es) => { if (es.some((x) => x.isIntersecting)) clearMarks(); }).observe(panel);

  // ---- the counter under each value, and what it allows
  function count(card) {
    const limitInput = card.querySelector("input[name=limit]");
    const limit = parseInt(limitInput ? limitInput.value : card.dataset.limit, 10);
    const n = card.querySelector("textarea[name=value]").value.length, over = n > limit;
    const c = card.querySelector(".counter"), err = card.querySelector(".limit-error");
    c.textContent = `${n} / ${limit} chars`;
    c.classList.toggle("over", over);
    card.classList.toggle("over", over);
    if (err) { err.hidden = !over; err.textContent = over ? `${n - limit} characters over the limit of ${limit}. Shorten it or raise the limit.` : ""; }
    const save = card.querySelector("button[type=submit]"); if (save) save.disabled = over;
  }
  document.addEventListener("htmx:load", (e) => (e.target.matches(".block-card") ? [e.target] : e.target.querySelectorAll(".block-card")).forEach(count));
  document.addEventListener("input", (e) => {
    const card = e.target.closest && e.target.closest(".block-card");
    if (card && (e.target.name === "value" || e.target.name === "limit")) { card.dataset.dirty = "1"; count(card); }
  });

  // ---- live: the server draws the changed card again (newest wins; an edit in progress is never thrown away)
  const version = (card) => parseInt(card.dataset.version || "0", 10);
  const editing = (card) => card.dataset.dirty === "1" && card.contains(document.activeElement);
  function changedElsewhere(card, v) {
    const n = card.querySelector(".remote-note");
    n.hidden = false;
    n.textContent = `Changed elsewhere (v${v}); saving will overwrite it.`;
  }
  window.AIDE_BLOCKS = {
    update(b) {  // workspace.js: a block_update event
      const card = $(`.block-card[data-block-id="${CSS.escape(b.id)}"]`);
      if (!card) { htmx.trigger(document.body, "blocks-changed"); return; }
      if (version(card) >= b.version) return;  // this tab's own save already shows it
      if (editing(card)) { changedElsewhere(card, b.version); return; }
      htmx.ajax("GET", card.dataset.cardUrl + "?live=1", {target: card, swap: "outerHTML"}).then(() => {
        if (!panelInSight()) markers().forEach((m) => m.setAttribute("data-memory-changed", ""));
      });
    },
  };
  document.body.addEventListener("htmx:beforeSwap", (e) => {  // a card read live, landing after a newer one or an edit
    const card = e.detail.target, fresh = /data-version="(\d+)"/.exec(e.detail.serverResponse || "");
    if (!card.matches(".block-card") || e.detail.requestConfig.verb !== "get" || !fresh) return;
    if (+fresh[1] <= version(card)) e.detail.shouldSwap = false;
    else if (editing(card)) { e.detail.shouldSwap = false; changedElsewhere(card, fresh[1]); }
  });

  // ---- "show the call": the tool call in the conversation, else its step in the inspector
  function findCall(id) {  // its "open in the workbench" link names the call
    const link = $(`#conversation .msg.tool_call_message a.open-workbench[data-call="${CSS.escape(id)}"]`);
    return link && link.closest(".msg");
  }
  function highlight(node) {
    window.AIDE_UI.flash(node, "call-highlight");
    node.scrollIntoView({block: "center"});
    if (!node.hasAttribute("tabindex")) node.setAttribute("tabindex", "-1");
    node.focus({preventScroll: true});
  }
  // not in the page (an older page, another conversation): its data-open-step opens the step, pointing at the call
  // (inspector.js; the server marks it)
  document.addEventListener("click", (e) => {
    const link = e.target.closest && e.target.closest("a.bc-call[data-call]"), node = link && findCall(link.dataset.call);
    if (!link || (!node && link.dataset.openStep)) return;
    e.preventDefault();
    e.stopPropagation();
    if (node) { window.AIDE_UI.showConversation(); highlight(node); }  // a phone's other pane, a drawer, go
  }, true);

  // a link to a call (a block's history: #step=…&call=…) shows it in the conversation (and in its step: inspector.js)
  const linked = new URLSearchParams(location.hash.slice(1)).get("call");
  if (linked) document.addEventListener("DOMContentLoaded", () => { const n = findCall(linked); if (n) highlight(n); });
})();
