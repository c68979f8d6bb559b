// Agent workspace layout. From 1280 px: three panes with splitters (drag, or arrow keys; double-click resets),
// widths remembered in localStorage. From 768 px: the inspector is a drawer (Inspector button, ✕, Esc or a click
// outside closes it). Below 768 px: one pane at a time, chosen with tabs (conversation, agent, context).
// Widths past what the stylesheet allows (30 % / 45 % of the window) are clamped here too, so a drag follows the mouse.
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
  function applyLayout() {
    for (const side of ["left", "right"]) {
      const prop = side === "left" ? "--left-w" : "--right-w";
      if (layout[side]) main.style.setProperty(prop, layout[side] + "px"); else main.style.removeProperty(prop);
    }
  }
  function clampWidth(side, w) {
    const vw = window.innerWidth;
    const cap = side === "left" ? vw * (wide.matches ? 0.30 : 0.40) : vw * 0.45;
    const other = side === "left" ? (wide.matches ? inspector.offsetWidth : 0) : settings.offsetWidth;
    return Math.max(MIN[side], Math.min(w, cap, vw - other - CENTER_MIN - 12));
  }
  applyLayout();
  document.querySelectorAll(".splitter").forEach((sp) => {
    const side = sp.dataset.split;
    const pane = side === "left" ? settings : inspector;
    function setWidth(w) {
      layout = Object.assign({}, layout, {[side]: Math.round(clampWidth(side, w))});
      applyLayout();
    }
    sp.addEventListener("pointerdown", (e) => {
      e.preventDefault();
      sp.setPointerCapture(e.pointerId);
      const startX = e.clientX, startW = pane.getBoundingClientRect().width;
      document.body.classList.add("resizing");
      const move = (m) => setWidth(side === "left" ? startW + (m.clientX - startX) : startW - (m.clientX - startX));
      const up = () => {
        sp.removeEventListener("pointermove", move);
        document.body.classList.remove("resizing");
        store.set("aide-layout", layout);
      };
      sp.addEventListener("pointermove", move);
      sp.addEventListener("pointerup", up, {once: true});
    });
    sp.addEventListener("keydown", (e) => {
      if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
      const dir = (e.key === "ArrowRight" ? 1 : -1) * (side === "left" ? 1 : -1);
      setWidth(pane.getBoundingClientRect().width + 24 * dir);
      store.set("aide-layout", layout);
    });
    sp.addEventListener("dblclick", () => { layout = Object.assign({}, layout, {[side]: null}); applyLayout(); store.set("aide-layout", layout); });
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

  // ---- one pane at a time (below 768 px)
  const tabs = document.querySelectorAll(".ws-tabs [data-pane]");
  function showPane(name) {
    main.dataset.pane = name;
    tabs.forEach((t) => t.setAttribute("aria-selected", t.dataset.pane === name ? "true" : "false"));
  }
  tabs.forEach((t) => t.addEventListener("click", () => showPane(t.dataset.pane)));
  showPane("conversation");

  // what opens in the inspector from elsewhere (a step chip in the conversation, "Save as test") brings it into view
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.target.id !== "step-detail" && e.target.id !== "test-editor") return;
    if (!e.target.childElementCount) return;
    if (phone.matches) showPane("inspector"); else if (!wide.matches) setDrawer(true);
  });
  document.body.addEventListener("aide:show-inspector", () => {  // a button asked for an inspector tab
    if (phone.matches) showPane("inspector"); else if (!wide.matches) setDrawer(true);
  });
  wide.addEventListener("change", () => { if (wide.matches) setDrawer(false); });
  // a menu (details.menu) closes once one of its items is chosen, or on a click elsewhere
  document.addEventListener("click", (e) => {
    document.querySelectorAll("details.menu[open]").forEach((m) => {
      if (!m.contains(e.target) || e.target.closest(".menu-items button")) m.removeAttribute("open");
    });
  });
})();
