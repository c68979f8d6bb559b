// Agent workspace, inspector side: tabs, the window slider, payload views (parts or
// raw JSON, remembered), copy, step chips, the runs table and the memory-block counters.
(function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const $ = (sel, root) => (root || document).querySelector(sel);
  const store = {
    get(k, d) { try { const v = localStorage.getItem(k); return v === null ? d : JSON.parse(v); } catch (e) { return d; } },
    set(k, v) { try { localStorage.setItem(k, JSON.stringify(v)); } catch (e) { /* private mode: not remembered */ } },
  };

  // ---- tabs
  function openTab(id) {
    document.querySelectorAll(".pill-nav [data-tab]").forEach((b) => {
      b.setAttribute("aria-selected", b.dataset.tab === id ? "true" : "false");
      document.getElementById(b.dataset.tab).hidden = b.dataset.tab !== id;
    });
    if (id === "tab-archival") htmx.trigger("#tab-archival", "intersect");
    store.set("aide-tab", id);
  }
  document.querySelectorAll(".pill-nav [data-tab]").forEach((btn) => btn.addEventListener("click", () => openTab(btn.dataset.tab)));
  const savedTab = store.get("aide-tab", "tab-context");
  if (savedTab !== "tab-context" && document.getElementById(savedTab)) openTab(savedTab);

  // ---- payload views: readable parts or the raw JSON (the choice is remembered)
  function applyPayloadView(root) {
    const raw = store.get("aide-payload-raw", false);
    (root || document).querySelectorAll(".payload-view").forEach((v) => {
      v.dataset.view = raw ? "raw" : "parts";
      v.querySelector(".parts").hidden = raw;
      v.querySelector("pre.raw").hidden = !raw;
      const t = v.querySelector("[data-toggle-raw]");
      t.setAttribute("aria-pressed", raw ? "true" : "false");
      t.textContent = raw ? "Readable" : "Raw JSON";
    });
  }

  // ---- context window slider: re-scale the breakdown from the section token counts while dragging (no write)
  function applyWindow() {
    const slider = $("#window-slider"), ctx = $("#ctx");
    if (!slider || !ctx) return;
    const limit = parseInt(slider.value, 10), total = parseInt(ctx.dataset.total, 10);
    $("#window-value").textContent = limit;
    const number = $("#window-number");
    if (number && document.activeElement !== number) number.value = limit;
    const fixed = parseInt(ctx.dataset.fixed, 10), warn = $("#window-fixed-warn");
    if (warn) {  // what the save would refuse, said while dragging (core.web.workspace.WINDOW_ROOM)
      warn.hidden = !(fixed + 256 > limit);
      warn.textContent = warn.hidden ? "" : "Too small: the system prompt, memory blocks and tool definitions alone take " +
        fixed + " tokens, leaving no room for a message. Saving needs at least " + (fixed + 256) + ".";
    }
    $("#ctx-limit").textContent = limit;
    $("#ctx-pct").textContent = (100 * total / limit).toFixed(1);
    $("#ctx-free").textContent = limit - total;
    ctx.querySelectorAll("#ctx-bar span[data-tokens]").forEach((s) => { s.style.width = (100 * s.dataset.tokens / limit) + "%"; });
    ctx.querySelectorAll("#ctx-table td.pct").forEach((td) => { td.textContent = (100 * td.dataset.tokens / limit).toFixed(2) + "%"; });
    $("#ctx-bar").classList.toggle("over", total > limit);
    const saved = parseInt(ctx.dataset.limit, 10);
    // the saved limit has its own note; a window the fixed part fills has the slider's
    $("#ctx-over-live").hidden = !(total > limit) || limit === saved || fixed + 256 > limit;
    const note = $("#unsaved-note"); if (note) note.hidden = limit === saved;
  }
  document.addEventListener("input", (e) => {
    if (e.target.id === "window-slider") applyWindow();
    if (e.target.id === "window-number") {  // the number field moves the slider (a value out of range waits)
      const slider = $("#window-slider"), v = parseInt(e.target.value, 10);
      if (slider && v >= parseInt(slider.min, 10) && v <= parseInt(slider.max, 10)) { slider.value = v; applyWindow(); }
    }
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
    s.dispatchEvent(new Event("input", {bubbles: true}));
    s.dispatchEvent(new Event("change", {bubbles: true}));
  });
  document.addEventListener("change", (e) => {  // leaving the number field: it shows what the slider holds
    if (e.target.id === "window-number") { const s = $("#window-slider"); if (s) { e.target.value = s.value; applyWindow(); } }
  });

  // ---- runs table: a click shows the run's steps; open rows stay open when the table refreshes
  const openRuns = new Set();
  function loadRunSteps(tbody) {
    const body = tbody.querySelector(".run-steps-body");
    tbody.querySelector(".run-steps").hidden = false;
    tbody.querySelector(".run-main").setAttribute("aria-expanded", "true");
    htmx.ajax("GET", body.dataset.url, {target: body, swap: "innerHTML"});
  }
  function toggleRun(tbody) {
    const id = tbody.dataset.run;
    if (openRuns.has(id)) {
      openRuns.delete(id);
      tbody.querySelector(".run-steps").hidden = true;
      tbody.querySelector(".run-main").setAttribute("aria-expanded", "false");
    } else { openRuns.add(id); loadRunSteps(tbody); }
  }

  document.body.addEventListener("htmx:afterSwap", (e) => {
    const t = e.target;
    if (t.id === "context-panel" || t.id === "settings-form") applyWindow();
    if (t.id === "context-panel" || t.id === "step-detail") applyPayloadView(t);
    if (t.id === "blocks-panel" || (t.closest && t.closest("#blocks-panel"))) initCounters();
    if (t.id === "runs-panel") t.querySelectorAll(".run-row").forEach((tb) => { if (openRuns.has(tb.dataset.run)) loadRunSteps(tb); });
  });

  // scroll the inspector so `target` starts just below its tab strip (which stays in view: it is sticky)
  function showBelowTabs(target) {
    const pane = target.closest("#inspector");
    const head = pane && pane.querySelector(":scope > .inspector-head");
    if (!pane || !head) { target.scrollIntoView({block: "start"}); return; }
    pane.scrollTop += target.getBoundingClientRect().top - head.getBoundingClientRect().bottom - 6;
  }

  function openStep(stepId) {
    openTab("tab-context");
    htmx.ajax("GET", A.stepUrl.replace("STEP", encodeURIComponent(stepId)), {target: "#step-detail", swap: "innerHTML"})
      .then(() => { const d = $("#step-detail"); if (d) showBelowTabs(d); });
    document.querySelectorAll(".step-chip.active").forEach((c) => c.classList.remove("active"));
    document.querySelectorAll(`.step-chip[data-step="${CSS.escape(stepId)}"]`).forEach((c) => c.classList.add("active"));
  }

  // a button elsewhere opens an inspector tab and shows one part of it (data-open-tab, data-scroll)
  function openFrom(opener) {
    openTab(opener.dataset.openTab);
    document.body.dispatchEvent(new CustomEvent("aide:show-inspector"));
    const target = opener.dataset.scroll ? $(opener.dataset.scroll) : null;
    if (!target) return;
    showBelowTabs(target);
    target.classList.remove("flash");
    void target.offsetWidth;  // restart the highlight
    target.classList.add("flash");
  }

  // ---- clicks: copy, step chips, payload toggles, runs, attach
  document.addEventListener("click", (e) => {
    const copy = e.target.closest("[data-copy]");
    if (copy) {
      const src = document.querySelector(copy.dataset.copy);
      const text = src ? src.textContent : "";
      const label = copy.textContent;
      const done = () => { copy.textContent = "Copied"; setTimeout(() => { copy.textContent = label; }, 1200); };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, done);
      else { const ta = document.createElement("textarea"); ta.value = text; document.body.appendChild(ta); ta.select(); document.execCommand("copy"); ta.remove(); done(); }
      return;
    }
    const chip = e.target.closest(".step-chip[data-step]");
    if (chip) { e.preventDefault(); openStep(chip.dataset.step); return; }
    // a node of a run's graph or a row of its timeline: this agent's steps open here, another agent's in its page
    const node = e.target.closest("[data-open-step]");
    if (node && !e.ctrlKey && !e.metaKey && !e.shiftKey) { e.preventDefault(); openStep(node.dataset.openStep); return; }
    const opener = e.target.closest("[data-open-tab]");  // e.g. a pause card's "Show the compiled request"
    if (opener && document.getElementById(opener.dataset.openTab)) { openFrom(opener); return; }
    if (e.target.closest("[data-toggle-raw]")) { store.set("aide-payload-raw", !store.get("aide-payload-raw", false)); applyPayloadView(); return; }
    const expand = e.target.closest("[data-expand-parts]");
    if (expand) {
      const parts = expand.closest(".payload-view").querySelectorAll("details.part");
      const open = !Array.from(parts).every((d) => d.open);
      parts.forEach((d) => { d.open = open; });
      expand.textContent = open ? "Collapse all" : "Expand all";
      return;
    }
    if (e.target.closest("[data-close-step]")) { $("#step-detail").textContent = ""; return; }
    if (e.target.closest("[data-close-diff]")) { $("#version-diff").textContent = ""; return; }
    const runRow = e.target.closest(".run-main");
    if (runRow && !e.target.closest("a, button")) { toggleRun(runRow.closest(".run-row")); return; }
    if (e.target.id === "attach-btn") {
      const note = $("#tools-version-note");
      htmx.ajax("POST", $("#attach-select").value, {target: "#tools-attached", values: {version_message: note ? note.value : ""}});
    }
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
  document.addEventListener("keydown", (e) => {
    const runRow = e.target.closest && e.target.closest(".run-main");
    if (runRow && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); toggleRun(runRow.closest(".run-row")); }
  });

  // ---- memory blocks: live chars / limit counter, and values pushed by other tabs and runs
  function initCounters() {
    document.querySelectorAll(".block-card textarea[name=value]").forEach(updateCounter);
  }
  function updateCounter(ta) {
    const card = ta.closest(".block-card");
    const limitInput = card.querySelector("input[name=limit]");
    const limit = parseInt(limitInput ? limitInput.value : card.dataset.limit, 10);
    const n = ta.value.length;
    const c = card.querySelector(".counter");
    c.textContent = n + " / " + limit + " chars";
    const over = n > limit;
    c.classList.toggle("over", over);
    card.classList.toggle("over", over);
    const err = card.querySelector(".limit-error");
    if (err) { err.hidden = !over; err.textContent = over ? `${n - limit} characters over the limit of ${limit}. Shorten it or raise the limit.` : ""; }
    const save = card.querySelector("button[type=submit]"); if (save) save.disabled = over;
  }
  document.addEventListener("input", (e) => {
    if (e.target.closest && e.target.closest(".block-card") && (e.target.name === "value" || e.target.name === "limit")) {
      const card = e.target.closest(".block-card");
      card.dataset.dirty = "1";
      updateCounter(card.querySelector("textarea[name=value]"));
    }
  });
  window.AIDE_BLOCKS = {
    update(b) {
      const card = document.querySelector(`.block-card[data-block-id="${CSS.escape(b.id)}"]`);
      if (!card) { htmx.trigger(document.body, "blocks-changed"); return; }
      const ta = card.querySelector("textarea[name=value]");
      if (card.dataset.dirty === "1" && document.activeElement === ta) {
        const n = card.querySelector(".remote-note"); if (n) { n.hidden = false; n.textContent = "Changed elsewhere (v" + b.version + "); saving will overwrite it."; }
        return;
      }
      ta.value = b.value;
      const lim = card.querySelector("input[name=limit]"); if (lim) lim.value = b.limit;
      const v = card.querySelector(".version"); if (v) v.textContent = "v" + b.version;
      card.dataset.dirty = "";
      updateCounter(ta);
    },
  };

  initCounters();
  applyWindow();
  applyPayloadView();
  // A link to a step of this agent opens it: ?step=ID (where an agent test went wrong, on its kept copy) or
  // #step=ID&call=ID (a block history entry: the step that made the change). htmx is deferred.
  const linkedStep = new URLSearchParams(location.search).get("step") ||
    new URLSearchParams(location.hash.slice(1)).get("step");
  if (linkedStep) document.addEventListener("DOMContentLoaded", () => openStep(linkedStep));
})();
