// Agent workspace, the conversation: where each server-rendered item goes, how a streamed part's token text fills
// its shell, and the context-window marks. Every item is drawn by the server (templates/core/_item.html, over the
// socket as each event's `html`, core.web.live); what a model or tool produced arrives escaped or is set as text.
window.AIDE_CONV = (function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const live = document.getElementById("live");
  const conv = document.getElementById("conversation");
  const seen = new Set();
  const streaming = new Map();  // "type:id" -> element being filled by token chunks
  const at = (sel, v) => conv.querySelector(sel.replace("?", CSS.escape(v || "")));
  const bodyOf = (n) => n.querySelector(".body").textContent;

  function nodes(html) {  // server-rendered, autoescaped
    const t = document.createElement("template");
    t.innerHTML = html || "";
    return Array.from(t.content.children);
  }
  function load(url) {  // a server-rendered fragment, as nodes
    return fetch(url, {credentials: "same-origin"}).then((r) => r.ok ? r.text() : Promise.reject(r.status)).then(nodes);
  }
  function local(id, text) {  // an item the server has not stored (yet): its markup drawn by the server, filled here
    const node = nodes(document.getElementById(id).innerHTML)[0];
    node.querySelector(":scope > .meta > span:last-child").textContent = new Date().toTimeString().slice(0, 8);
    node.querySelector(".body").textContent = text;
    const more = node.querySelector(".show-all");
    if (more && text.length > 3000) {  // as the server draws a long body (core/templatetags/ide.py: show_all)
      more.dataset.label = more.textContent = "Show all · " + text.length.toLocaleString("en") + " characters";
      more.hidden = false;
    }
    return node;
  }
  const note = (text) => local("conv-note", text);
  const short = (id) => id ? "…" + String(id).slice(-8) : "";
  function scrollDown(force) {
    if (force || conv.scrollHeight - conv.scrollTop - conv.clientHeight < 120) conv.scrollTop = conv.scrollHeight;
  }
  function dropEmpty() { const e = document.getElementById("empty-history"); if (e) e.remove(); }
  function bump(name) { if (window.htmx) htmx.trigger(document.body, name); }

  // ---- the context-window mark every message carries: re-drawn by the server when the window changed
  function refreshMarks() {
    const marked = conv.querySelectorAll("[data-id][data-ctx]");
    const first = conv.querySelector("[data-seq]");
    if (!marked.length) return;
    const url = A.windowUrl + (first ? (A.windowUrl.includes("?") ? "&" : "?") + "since=" + encodeURIComponent(first.dataset.seq) : "");
    fetch(url, {credentials: "same-origin"}).then((r) => r.ok ? r.json() : null).then((data) => {
      if (!data) return;
      const inCtx = new Set(data.in_context);
      marked.forEach((n) => {
        const on = inCtx.has(n.dataset.id);
        n.dataset.ctx = on ? "in" : "out";
        const old = n.querySelector(":scope > .meta > .ctx-mark, :scope > summary > .ctx-mark, :scope .divider-label > .ctx-mark");
        if (old) old.replaceWith(...nodes(on ? data.html.in : (data.html[n.dataset.id] || data.html.out)));
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
    dropEmpty();
    live.insertBefore(node, live.querySelector(".msg.streaming"));
  }
  function before(node, anchor) { if (anchor) anchor.before(node); else place(node); scrollDown(true); }
  const TEXT = {assistant_message: "content", reasoning_message: "reasoning"};
  const textOf = (node, t) => TEXT[t] ? node.querySelector(".body") : node.querySelector("pre");
  let catchingUp = false;  // joined mid-reply: a shell's start comes with the snapshot
  function start(html, key) {  // a streamed part's shell (the server sends it with the part's first chunk)
    const node = nodes(html)[0];
    if (!node) return null;
    node.classList.add("streaming");
    node.classList.toggle("catching-up", catchingUp);
    streaming.set(key, node);
    dropEmpty();
    live.appendChild(node);
    return node;
  }
  function onDelta(ev) {
    const t = ev.message_type, key = t + ":" + ev.id;
    const node = streaming.get(key) || start(ev.html, key);
    if (!node) return;
    if (TEXT[t]) textOf(node, t).textContent += ev[TEXT[t]] || "";
    else textOf(node, t).textContent += (ev.tool_call || {}).arguments || "";
    scrollDown();
  }

  // A tab that joined while a reply streams (a reload, a second tab, a socket back) gets a snapshot of every part
  // streamed so far (core.runs.emit), shells drawn by the server: its text replaces what the chunks since joining drew.
  function catchUp(on) { catchingUp = on; }
  function onSnapshot(ev) {
    for (const part of ev.parts || []) {
      const t = part.message_type, key = t + ":" + part.id;
      if (!streaming.has(key) && at('[data-id="?"]:not(.streaming)', part.id)) continue;  // stored meanwhile: shown whole
      const node = streaming.get(key) || start(part.html, key);
      if (!node) continue;
      textOf(node, t).textContent = (TEXT[t] ? part.text : part.arguments) || "";
      node.classList.remove("catching-up");
      live.appendChild(node);  // in the order they streamed (a chunk since joining may have drawn a later part first)
    }
    catchingUp = false;
    scrollDown();
  }

  // ---- the person's own message before the server stores it: the server's markup (workspace.html), filled here.
  // Its state (sending, sent, queued, failed) shows through data-state and the label; Retry and Edit are in the markup.
  function bubble(text, state, label) {
    const p = local("conv-bubble", text);
    setBubble(p, state, label);
    place(p);
    scrollDown(true);
    return p;
  }
  function setBubble(p, state, label) {
    p.dataset.state = state;
    p.querySelector(".pending-label").textContent = label || "";
  }
  function failBubble(p, reason) {
    p.classList.remove("pending");
    p.classList.add("failed");
    setBubble(p, "failed", "not delivered");
    if (reason) p.querySelector(".fail-reason").textContent = reason;
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
      const known = at('.wait-card[data-id="?"]', ev.id);
      if (known) { if (hooks.placed) hooks.placed(ev, known, true); return; }
    }
    const items = nodes(ev.html);  // one item, or a reasoning and the call it led to
    const node = items.pop();
    if (!node) return;  // nothing shown (send_message's receipt, an event the conversation does not show)
    // the claim stored the person's message (a reload shows it) before the step that takes it into the window
    const shown = t === "user_message" && ev.id && at('.msg[data-id="?"]:not(.streaming)', ev.id);
    if (shown) { shown.replaceWith(node); return; }
    if (t === "user_message" && !ev.kind) {  // our own message arriving: it takes the pending bubble's place
      const bubbles = Array.from(live.querySelectorAll(".msg.user_message.pending"));
      const pending = bubbles.find((p) => ev.otid && p.dataset.otid === ev.otid) || bubbles.find((p) =>
        bodyOf(p) === ev.content && (!p.dataset.run || !ev.run_id || p.dataset.run === ev.run_id));
      // a copy left undelivered by an earlier failed run (here or in another tab) has now arrived
      live.querySelectorAll(".msg.user_message.failed").forEach((f) => { if (bodyOf(f) === ev.content) f.remove(); });
      if (pending) { pending.replaceWith(node); scrollDown(true); return; }
    }
    const waiting = t === "user_message" && ev.kind === "summary" &&
      Array.from(live.querySelectorAll(".msg.user_message.pending")).find((p) => !p.dataset.run || p.dataset.run === ev.run_id);
    if (waiting) live.insertBefore(node, waiting);  // the eviction happened before this input was stored
    else place(node, ev.id ? t + ":" + ev.id : null);
    items.forEach((n) => node.before(n));
    if (hooks.placed) hooks.placed(ev, node);
    if (t === "stop_reason") bump("context-changed");
    if (t === "user_message" && ev.kind === "summary") refreshMarks();
    scrollDown(true);
  }

  // ---- a huge message (a pasted document, a tool's long output) shows collapsed, with its size and Show all: the
  // server adds the button after a long body (core/templatetags/ide.py), the CSS collapses a body followed by it
  conv.addEventListener("click", (e) => {
    const more = e.target.closest(".show-all");
    if (!more) return;
    const open = more.getAttribute("aria-expanded") !== "true";
    more.setAttribute("aria-expanded", String(open));
    more.textContent = open ? "Collapse" : more.dataset.label;
  });
  new MutationObserver((changes) => {  // what arrives live may hold htmx attributes (Branch here)
    for (const c of changes) c.addedNodes.forEach((n) => { if (n.nodeType === 1 && window.htmx) htmx.process(n); });
  }).observe(live, {childList: true});

  function reset() { live.textContent = ""; streaming.clear(); seen.clear(); }
  function dropStreams() { streaming.forEach((n) => n.remove()); streaming.clear(); }  // their messages never came

  return {catchUp, onSnapshot, nodes, load, note, short, scrollDown, bump, bubble, setBubble, failBubble, place, before,
          onDelta, render, hooks, refreshMarks, trailingStatus, reset, dropStreams, live, at, bodyOf};
})();
