// Layout and contrast audit run in the page by tests/e2e/test_layout.py; returns a list of problems (strings).
// Squeezed: a text field under 48 px or the code editor under 240 px wide.
// Cut off: a visible element's box leaves the viewport (or the box of a non-scrolling ancestor that clips it).
// Overlap: two visible text boxes that are not nested intersect, or another element paints over a text box.
// Contrast: WCAG 2 ratio of each visible text's colour against the background painted behind it (ancestors'
// background colours composited, opacity applied); 4.5:1 for normal text, 3:1 for large (24px, or 18.66px bold).
() => {
  const problems = [];
  const W = document.documentElement.clientWidth, H = window.innerHeight;
  const doc = document.scrollingElement;
  if (doc.scrollWidth > doc.clientWidth + 1) problems.push(`horizontal scroll: document is ${doc.scrollWidth}px wide in ${doc.clientWidth}px`);

  // a pane or card that scrolls sideways hides its right edge: only code, editors and strips of tabs or columns may
  const SIDEWAYS = "pre, textarea, .CodeMirror, .CodeMirror *, .replay-columns, .pill-nav, .ws-tabs, .topbar nav";
  for (const el of document.body.querySelectorAll("*")) {
    const o = getComputedStyle(el).overflowX;
    if ((o === "auto" || o === "scroll") && el.scrollWidth > el.clientWidth + 1 && !el.matches(SIDEWAYS) && el.checkVisibility())
      problems.push(`scrolls sideways (${el.scrollWidth}px in ${el.clientWidth}px): ${label(el)}`);
  }

  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  function rgba(css) {  // any CSS colour (rgb(), color(srgb …), color-mix results) to [r, g, b, a] in sRGB
    if (!css || css === "transparent") return [0, 0, 0, 0];
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = "#000"; ctx.fillStyle = css;
    ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2], d[3] / 255];
  }
  function over(top, under) {  // top composited over an opaque `under`
    const a = top[3];
    return [top[0] * a + under[0] * (1 - a), top[1] * a + under[1] * (1 - a), top[2] * a + under[2] * (1 - a), 1];
  }
  function lum(c) {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  }
  function ratio(a, b) { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); }

  function shown(el) {
    if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) return false;  // also inside a closed <details>
    const cs = getComputedStyle(el);
    if (cs.visibility !== "visible" || cs.display === "none" || parseFloat(cs.opacity) === 0) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  }
  function label(el) {
    let s = el.tagName.toLowerCase();
    if (el.id) s += "#" + el.id;
    if (typeof el.className === "string" && el.className.trim()) s += "." + el.className.trim().split(/\s+/).slice(0, 3).join(".");
    const t = (el.value || el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 40);
    return t ? `${s} "${t}"` : s;
  }
  // The visible part of an element: its box cut by every ancestor that clips (overflow not visible).
  // `cut` tells whether a non-scrolling clipper (overflow hidden/clip) hides part of it.
  function visibleBox(el) {
    const r = el.getBoundingClientRect();
    let box = {l: r.left, t: r.top, r: r.right, b: r.bottom}, cut = null;
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.overflowX === "visible" && cs.overflowY === "visible") continue;
      const ar = a.getBoundingClientRect();
      const scrollsX = cs.overflowX === "auto" || cs.overflowX === "scroll";
      if (!scrollsX && (box.l < ar.left - 1 || box.r > ar.right + 1) && !cut && !el.closest(".CodeMirror")) cut = a;
      box = {l: Math.max(box.l, ar.left), t: Math.max(box.t, ar.top), r: Math.min(box.r, ar.right), b: Math.min(box.b, ar.bottom)};
      if (box.l >= box.r || box.t >= box.b) return {box: null, cut};
    }
    box = {l: Math.max(box.l, 0), t: Math.max(box.t, 0), r: Math.min(box.r, W), b: Math.min(box.b, H)};
    return {box: box.l < box.r && box.t < box.b ? box : null, cut};
  }
  const ownText = (el) => Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim());
  const textish = (el) => ownText(el) || (el.matches("input:not([type=hidden]):not([type=checkbox]):not([type=radio]):not([type=range]):not([type=file]), select, textarea") && (el.value || "").trim());

  // sticky and fixed boxes (the top bar, a sticky submit row, a drawer) are meant to lie over what scrolls under them
  const floating = (el) => { for (let a = el; a && a !== document.body; a = a.parentElement) { const p = getComputedStyle(a).position; if (p === "sticky" || p === "fixed") return a; } return null; };
  const seen = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (["SCRIPT", "STYLE", "TEMPLATE", "DATALIST", "OPTION", "BR"].includes(el.tagName)) continue;
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    // cut off by the viewport: the element reaches past the left or right edge of the window
    const fixedScroller = (() => { for (let a = el.parentElement; a; a = a.parentElement) { const o = getComputedStyle(a).overflowX; if (o === "auto" || o === "scroll") return a; } return null; })();
    if (!fixedScroller && !el.parentElement.closest(".CodeMirror") && (r.left < -1 || r.right > W + 1)) { problems.push(`cut off by the window (${Math.round(r.left)}..${Math.round(r.right)} of ${W}): ${label(el)}`); continue; }
    // squeezed: a text field or an editor too narrow to type in
    if (el.matches("input:not([type=checkbox]):not([type=radio]):not([type=hidden]):not([type=file]):not([type=range]), textarea:not(.CodeMirror textarea), select") && r.width < 48) problems.push(`squeezed to ${Math.round(r.width)}px: ${label(el)}`);
    if (el.matches(".CodeMirror") && r.width < 240) problems.push(`code editor squeezed to ${Math.round(r.width)}px`);
    const {box, cut} = visibleBox(el);
    if (!box) continue;
    // truncated on purpose: an ellipsis, with the full text in a tooltip (title) on it or around it
    const ellipsis = cut && getComputedStyle(cut).textOverflow === "ellipsis" && (cut.closest("[title]") || el.closest("[title]"));
    if (cut && textish(el) && !ellipsis) { problems.push(`cut off by ${label(cut)}: ${label(el)}`); continue; }
    if (!textish(el)) continue;
    if (!el.closest(".CodeMirror") || el.closest(".CodeMirror-line")) seen.push({el, box});
    // contrast: the colour composited over what is painted behind it
    const cs = getComputedStyle(el);
    if (el.closest("button:disabled, [aria-disabled=true], input:disabled, select:disabled, textarea:disabled")) continue;  // WCAG: inactive controls are exempt
    let layers = [], opacity = 1, a = el;
    for (; a; a = a.parentElement) {
      const acs = getComputedStyle(a);
      opacity *= parseFloat(acs.opacity);
      if (acs.backgroundImage !== "none" && a !== document.documentElement) { layers = null; break; }
      const bg = rgba(acs.backgroundColor);
      if (bg[3] > 0) layers.push(bg);
      if (bg[3] >= 1) break;
    }
    if (!layers) continue;  // a gradient or image behind: not measured
    for (a = a && a.parentElement; a; a = a.parentElement) opacity *= parseFloat(getComputedStyle(a).opacity);
    let bg = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    let fg = rgba(cs.color);
    fg = [fg[0], fg[1], fg[2], fg[3] * opacity];
    // opacity fades the text toward what lies behind the faded element: approximate with its own background
    const shownFg = over(fg, bg);
    const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    const c = ratio(shownFg, bg);
    if (c < need - 0.005) problems.push(`contrast ${c.toFixed(2)} < ${need} (${cs.color} on rgb(${bg.slice(0, 3).map(Math.round)})${opacity < 1 ? `, opacity ${opacity}` : ""}): ${label(el)}`);
  }
  // overlap: text boxes that intersect though neither contains the other, or something painted over a text
  for (let i = 0; i < seen.length; i++) {
    const p = seen[i];
    const cx = (p.box.l + p.box.r) / 2, cy = (p.box.t + p.box.b) / 2;
    const hit = document.elementFromPoint(cx, cy);
    if (hit && !p.el.contains(hit) && floating(hit) === floating(p.el) && !hit.contains(p.el) && !(p.el.closest("label") && p.el.closest("label").contains(hit))) {
      problems.push(`covered by ${label(hit)}: ${label(p.el)}`);
    }
    for (let j = i + 1; j < seen.length; j++) {
      const q = seen[j];
      if (p.el.contains(q.el) || q.el.contains(p.el) || floating(p.el) !== floating(q.el)) continue;
      const w = Math.min(p.box.r, q.box.r) - Math.max(p.box.l, q.box.l), h = Math.min(p.box.b, q.box.b) - Math.max(p.box.t, q.box.t);
      if (w > 2 && h > 2) problems.push(`overlap ${Math.round(w)}x${Math.round(h)}: ${label(p.el)} / ${label(q.el)}`);
    }
  }
  return Array.from(new Set(problems));
}
