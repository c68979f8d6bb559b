// Agent workspace layout. From 1280 px: three panes with splitters (drag, or arrow keys; double-click resets),
// widths remembered in localStorage. From 768 px: the inspector is a drawer (Inspector button, ✕, Esc or a click
// outside closes it). Below 768 px: one pane at a time, chosen with tabs (conversation, agent, context).
// Widths past what the stylesheet allows (30 % / 45 % of the window) are clamped here too, so a drag follows the mouse.
// window.AIDE_UI holds what the workspace's other scripts share: the remembered settings, the flash, the inspector.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const main = $("main.workspace");
  if (!main) return;
  const wide = matchMedia("(min-width: 1280px)"), phone = matchMedia("(max-width: 767.98px)");
  const store = {
    get(k, d) { try { const v = localStorage.getItem(k); return v === null ? d : JSON.parse(v); } catch (e) { return d; } },
    set(k, v) { try { localStorage.setItem(k, JSON.stringify(v)); } catch (e) { /* private mode: not remembered */ } },
  };
  const settings = $("#settings-pane"), inspector = $("#inspector");

  // ---- splitters
  const MIN = {left: 200, right: 300}, CENTER_MIN = 360;
  let layout = store.get("aide-layout", {}) || {};
  function applyLayout(side, w) {
    if (side) layout = Object.assign({}, layout, {[side]: w});
    for (const s of ["left", "right"]) {
      if (layout[s]) main.style.setProperty(`--${s}-w`, layout[s] + "px"); else main.style.removeProperty(`--${s}-w`);
    }
  }
  function clampWidth(side, w) {
    const vw = window.innerWidth;
    const cap = side === "left" ? vw * (wide.matches ? 0.30 : 0.40) : vw * 0.45;
    const other = side === "left" ? (wide.matches ? inspector.offsetWidth : 0) : settings.offsetWidth;
    return Math.round(Math.max(MIN[side], Math.min(w, cap, vw - other - CENTER_MIN - 12)));
  }
  applyLayout();
  document.querySelectorAll(".splitter").forEach((sp) => {
    const side = sp.dataset.split, pane = side === "left" ? settings : inspector, sign = side === "left" ? 1 : -1;
    const setWidth = (w) => applyLayout(side, clampWidth(side, w));
    sp.addEventListener("pointerdown", (e) => {
      e.preventDefault();
      sp.setPointerCapture(e.pointerId);
      const startX = e.clientX, startW = pane.getBoundingClientRect().width;
      document.body.classList.add("resizing");
      const move = (m) => setWidth(startW + sign * (m.clientX - startX));
      sp.addEventListener("pointermove", move);
      sp.addEventListener("pointerup", () => {
        sp.removeEventListener("pointermove", move);
        document.body.classList.remove("resizing");
        store.set("aide-layout", layout);
      }, {once: true});
    });
    sp.addEventListener("keydown", (e) => {
      if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
      setWidth(pane.getBoundingClientRect().width + 24 * sign * (e.key === "ArrowRight" ? 1 : -1));
      store.set("aide-layout", layout);
    });
    sp.addEventListener("dblclick", () => { applyLayout(side, null); store.set("aide-layout", layout); });
  });

  // ---- the inspector as a drawer (768 to 1279 px)
  const toggle = $("#inspector-toggle");
  function setDrawer(open) {
    document.body.classList.toggle("inspector-open", open);
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) { const t = inspector.querySelector('.pill-nav [aria-selected="true"]'); if (t) t.focus({preventScroll: true}); }
  }
  toggle.addEventListener("click", () => setDrawer(!document.body.classList.contains("inspector-open")));
  $("#inspector-close").addEventListener("click", () => { setDrawer(false); toggle.focus(); });
  $("#drawer-backdrop").addEventListener("click", () => setDrawer(false));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.body.classList.contains("inspector-open") && !e.defaultPrevented) { setDrawer(false); toggle.focus(); }
  });
  wide.addEventListener("change", () => { if (wide.matches) setDrawer(false); });

  // ---- one pane at a time (below 768 px)
  const tabs = document.querySelectorAll(".ws-tabs [data-pane]");
  function showPane(name) {
    main.dataset.pane = name;
    tabs.forEach((t) => t.setAttribute("aria-selected", t.dataset.pane === name ? "true" : "false"));
  }
  tabs.forEach((t) => t.addEventListener("click", () => showPane(t.dataset.pane)));
  showPane("conversation");

  // what opens in the inspector from elsewhere (a step chip in the conversation, "Save as test") brings it into view
  function showInspector() { if (phone.matches) showPane("inspector"); else if (!wide.matches) setDrawer(true); }
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if ((e.target.id === "step-detail" || e.target.id === "test-editor") && e.target.childElementCount) showInspector();
  });
  // a menu (details.menu) closes once one of its items is chosen, or on a click elsewhere
  document.addEventListener("click", (e) => {
    document.querySelectorAll("details.menu[open]").forEach((m) => {
      if (!m.contains(e.target) || e.target.closest(".menu-items button")) m.removeAttribute("open");
    });
  });

  window.AIDE_UI = {
    store,
    showInspector,
    showConversation() { if (phone.matches) showPane("conversation"); setDrawer(false); },
    flash(node, cls) {  // (re)start a highlight animation
      node.classList.remove(cls || "flash");
      void node.offsetWidth;
      node.classList.add(cls || "flash");
    },
  };
})();
