// Agent workspace, the conversation: where each server-rendered item goes, how a streamed part's token text fills
// its shell, and the context-window marks. What a model or tool produced arrives escaped or is set as textContent.
window.AIDE_CONV = (function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const $ = (sel, root) => (root || document).querySelector(sel);
  const live = $("#live");
  const conv = $("#conversation");
  const seen = new Set();
  const streaming = new Map();  // "type:id" -> element being filled by token chunks

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  // Every item is drawn by the server (templates/core/_item.html): the history, and over the socket each event's
  // `html` (core.web.live). The page only places those fragments and appends streamed tokens' text to a shell.
  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html || "";  // server-rendered, autoescaped
    return t.content.firstElementChild;
  }
  function local(id, text) {  // an item the server has not stored (yet): its markup drawn by the server, filled here
    const node = fragment(document.getElementById(id).innerHTML);
    const spans = node.querySelectorAll(":scope > .meta > span:not(.spacer):not(.pending-label)");
    if (spans.length) spans[spans.length - 1].textContent = new Date().toTimeString().slice(0, 8);
    node.querySelector(".body").textContent = text;
    return node;
  }
  function note(text) { return local("conv-note", text); }
  function short(id) { return id ? "…" + String(id).slice(-8) : ""; }
  function detailText(detail) {
    if (detail == null || detail === "") return "";
    if (typeof detail === "string") return detail;
    if (typeof detail === "object" && detail.available) return "Available models: " + detail.available.join(", ");
    return "";  // structured details (a busy run id, …) are shown by the UI itself
  }
  function nearBottom() { return conv.scrollHeight - conv.scrollTop - conv.clientHeight < 120; }
  function scrollDown(force) { if (force || nearBottom()) conv.scrollTop = conv.scrollHeight; }
  function dropEmpty() { const e = $("#empty-history"); if (e) e.remove(); }
  function bump(name) { if (window.htmx) htmx.trigger(document.body, name); }

  // ---- the context-window mark every message carries: re-drawn by the server when the window changed
  function refreshMarks() {
    const nodes = conv.querySelectorAll("[data-id][data-ctx]");
    if (!nodes.length) return;
    const first = conv.querySelector("[data-seq]");
    const sep = A.windowUrl.includes("?") ? "&" : "?";
    const url = A.windowUrl + (first ? sep + "since=" + encodeURIComponent(first.dataset.seq) : "");
    fetch(url, {credentials: "same-origin"}).then((r) => r.ok ? r.json() : null).then((data) => {
      if (!data) return;
      const inCtx = new Set(data.in_context);
      nodes.forEach((n) => {
        const on = inCtx.has(n.dataset.id);
        n.dataset.ctx = on ? "in" : "out";
        const old = n.querySelector(":scope > .meta > .ctx-mark, :scope > summary > .ctx-mark, :scope .divider-label > .ctx-mark");
        const mark = fragment(on ? data.html.in : (data.html[n.dataset.id] || data.html.out));
        if (old && mark) old.replaceWith(mark);
      });
    }).catch(() => {});
  }

  const hooks = {placed: null};  // waits.js: a card or an answer arrived

  // ---- placing items: a final message replaces its streamed chunks; others go before what is still streaming
  function place(node, key) {
    // send_message may stream as a tool call and end as the assistant_message it stands for
    const alt = key && key.startsWith("assistant_message:") ? "tool_call_message:" + key.slice(18) : null;
    const hit = key && streaming.has(key) ? key : (alt && streaming.has(alt) ? alt : null);
    if (hit) { streaming.get(hit).replaceWith(node); streaming.delete(hit); return; }
    const first = live.querySelector(".msg.streaming");
    if (first) live.insertBefore(node, first); else live.appendChild(node);
  }
  const DELTA_FIELD = {assistant_message: "content", reasoning_message: "reasoning"};
  function start(ev, key) {  // a streamed part's shell (the server sends it with the part's first chunk)
    const node = fragment(ev.html);
    if (!node) return null;
    node.classList.add("streaming");
    if (catchingUp) node.classList.add("catching-up");  // joined mid-reply: its start comes with the snapshot
    streaming.set(key, node);
    dropEmpty();
    live.appendChild(node);
    return node;
  }
  function onDelta(ev) {
    const t = ev.message_type, key = t + ":" + ev.id;
    const node = streaming.get(key) || start(ev, key);
    if (!node) return;
    if (t === "tool_call_message" || t === "approval_request_message") {
      const tc = ev.tool_call || {};
      const code = node.querySelector("code");
      if (tc.name && code && !code.textContent) code.textContent = tc.name;
      node.querySelector("pre").textContent += tc.arguments || "";
    } else if (DELTA_FIELD[t]) {
      node.querySelector(".body").textContent += ev[DELTA_FIELD[t]] || "";
    }
    scrollDown();
  }

  // A tab that joined while a reply streams (a reload, a second tab, a socket back) gets a snapshot of every part
  // streamed so far (core.runs.emit): its text replaces what the chunks since joining drew.
  let catchingUp = false;
  function catchUp(on) { catchingUp = on; }
  function onSnapshot(ev) {
    for (const part of ev.parts || []) {
      const t = part.message_type, key = t + ":" + part.id;
      if (!streaming.has(key)) {
        const stored = conv.querySelector(`[data-id="${CSS.escape(part.id || "")}"]:not(.streaming)`);
        if (stored) continue;  // it was stored meanwhile: the stored message shows it whole
        start(Object.assign({}, part, {delta: true, tool_call: {name: part.name || "", arguments: ""}}), key);
      }
      const node = streaming.get(key);
      if (!node) continue;
      if (t === "tool_call_message" || t === "approval_request_message") node.querySelector("pre").textContent = part.arguments || "";
      else if (DELTA_FIELD[t]) node.querySelector(".body").textContent = part.text || "";
      node.classList.remove("catching-up");
      live.appendChild(node);  // in the order they streamed (a chunk since joining may have drawn a later part first)
    }
    catchingUp = false;
    scrollDown();
  }

  // ---- the person's own message before the server stores it: the server's markup (workspace.html), filled here
  function bubble(text, state, note) {
    const p = local("conv-bubble", text);
    p.dataset.state = state;
    p.querySelector(".pending-label").textContent = note || "";
    dropEmpty();
    place(p);
    scrollDown(true);
    return p;
  }
  function setBubble(p, state, note) {
    p.dataset.state = state;
    const n = p.querySelector(".pending-label"); if (n) n.textContent = note || "";
  }
  function failBubble(p, message) {
    p.classList.remove("pending");
    p.classList.add("failed");
    setBubble(p, "failed", "not delivered");
    if (!p.querySelector(".retry-row")) {
      const row = el("div", "row retry-row");
      const r = el("button", "small primary", "Retry"); r.type = "button"; r.dataset.retry = "";
      const e = el("button", "small ghost", "Edit"); e.type = "button"; e.dataset.edit = "";
      row.appendChild(r); row.appendChild(e);
      p.appendChild(row);
    }
    if (message) { const err = el("div", "error small fail-reason", message); p.appendChild(err); }
  }

  function trailingStatus() {  // the run's closing lines (stop reason, usage), which its notice goes before
    let first = null;
    for (let n = live.lastElementChild; n && n.matches(".msg.stop_reason, .msg.usage_statistics"); n = n.previousElementSibling) first = n;
    return first;
  }

  function render(ev) {
    const t = ev.message_type;
    const key = ev.id ? t + ":" + ev.id + ":" + (t === "tool_call_message" ? (ev.tool_call || {}).tool_call_id : "") : null;
    if (key && seen.has(key)) return;
    if (key) seen.add(key);
    if (t === "approval_request_message" && ev.id) {  // already on the page (the history held it): brought up to date
      const known = conv.querySelector(`.approval-card[data-id="${CSS.escape(ev.id)}"]`);
      if (known) { if (hooks.placed) hooks.placed(ev, known, true); return; }
    }
    const box = el("div");
    box.innerHTML = ev.html || "";  // server-rendered, autoescaped: one item, or a reasoning and the call it led to
    const nodes = Array.from(box.children);
    if (!nodes.length) return;  // nothing shown (send_message's receipt, an event the conversation does not show)
    const node = nodes[nodes.length - 1];
    // the claim stored the person's message (a reload shows it) before the step that takes it into the window
    const shown = t === "user_message" && ev.id && conv.querySelector(`.msg[data-id="${CSS.escape(ev.id)}"]:not(.streaming)`);
    if (shown) { shown.replaceWith(node); return; }
    if (t === "user_message" && !ev.kind) {  // our own message arriving: it takes the pending bubble's place
      const bubbles = Array.from(live.querySelectorAll(".msg.user_message.pending"));
      const pending = bubbles.find((p) => ev.otid && p.dataset.otid === ev.otid) || bubbles.find((p) =>
        p.querySelector(".body").textContent === ev.content && (!p.dataset.run || !ev.run_id || p.dataset.run === ev.run_id));
      // a copy left undelivered by an earlier failed run (here or in another tab) has now arrived
      live.querySelectorAll(".msg.user_message.failed").forEach((f) => {
        if (f.querySelector(".body").textContent === ev.content) f.remove();
      });
      if (pending) { pending.replaceWith(node); scrollDown(true); return; }
    }
    dropEmpty();
    const waiting = t === "user_message" && ev.kind === "summary" &&
      Array.from(live.querySelectorAll(".msg.user_message.pending")).find((p) => !p.dataset.run || p.dataset.run === ev.run_id);
    if (waiting) live.insertBefore(node, waiting);  // the eviction happened before this input was stored
    else place(node, ev.id ? t + ":" + ev.id : null);
    nodes.slice(0, -1).forEach((n) => node.before(n));
    if (hooks.placed) hooks.placed(ev, node);
    if (t === "stop_reason") bump("context-changed");
    if (t === "user_message" && ev.kind === "summary") refreshMarks();
    scrollDown(true);
  }

  // ---- a huge message (a pasted document, a tool's long output) shows collapsed, with its size and Show all: one
  // place for history, live messages and pages loaded later (whatever enters the conversation)
  const LONG_CHARS = 3000;
  function longify(root) {
    const boxes = root.matches && root.matches(".msg:not(.streaming)") ? [root] : Array.from(root.querySelectorAll ? root.querySelectorAll(".msg:not(.streaming)") : []);
    for (const box of boxes) {
      for (const b of box.querySelectorAll(":scope > .body, :scope > pre, :scope > details > pre, :scope > details > .body")) {
        const n = b.textContent.length;
        if (n <= LONG_CHARS || b.dataset.long) continue;
        b.dataset.long = "1";
        b.classList.add("long");
        const more = el("button", "small ghost show-all", "Show all · " + n.toLocaleString("en") + " characters");
        more.type = "button";
        more.dataset.chars = n;
        more.setAttribute("aria-expanded", "false");
        b.after(more);
      }
    }
  }
  longify(conv);
  new MutationObserver((changes) => {
    for (const c of changes) c.addedNodes.forEach((n) => { if (n.nodeType === 1) longify(n); });
  }).observe(conv, {childList: true, subtree: true});
  conv.addEventListener("click", (e) => {
    const more = e.target.closest(".show-all");
    if (!more) return;
    const body = more.previousElementSibling, open = body.classList.toggle("long") === false;
    more.setAttribute("aria-expanded", open ? "true" : "false");
    more.textContent = open ? "Collapse" : "Show all · " + Number(more.dataset.chars).toLocaleString("en") + " characters";
  });

  function reset() { live.textContent = ""; streaming.clear(); seen.clear(); }
  function dropStreams() { streaming.forEach((n) => n.remove()); streaming.clear(); }  // their messages never came

  return {catchUp, onSnapshot, el, note, short, detailText, scrollDown, dropEmpty, bump, bubble, setBubble, failBubble, place, onDelta, render,
          hooks, refreshMarks, trailingStatus, reset, dropStreams, live};
})();
