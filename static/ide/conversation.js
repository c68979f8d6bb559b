// Agent workspace, the conversation: how each message, notice, divider and token chunk is drawn, and the
// context-window mark every message carries. Everything a model or tool produced is inserted with textContent.
window.AIDE_CONV = (function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const $ = (sel, root) => (root || document).querySelector(sel);
  const live = $("#live");
  const conv = $("#conversation");
  const shownCalls = new Set();
  const seen = new Set();
  const streaming = new Map();  // "type:id" -> element being filled by token chunks
  const NON_USER_PREFIX = "[This is an automated system message hidden from the user] ";
  const SUMMARY_SPLIT = "The following is a summary of the previous messages: ";
  const namesEl = document.getElementById("agent-names");
  const agentNames = namesEl ? JSON.parse(namesEl.textContent) : {};

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function time(d) {
    const t = d ? new Date(d) : new Date();
    return isNaN(t) ? "" : t.toTimeString().slice(0, 8);
  }
  function breakable(node, name) {  // a snake_case name may wrap after its underscores, not inside its words
    node.textContent = "";
    String(name == null ? "" : name).split(/(?<=_)/).forEach((piece, i) => {
      if (i) node.appendChild(document.createElement("wbr"));
      node.appendChild(document.createTextNode(piece));
    });
    return node;
  }
  function short(id) { return id ? "…" + String(id).slice(-8) : ""; }
  function pretty(args) {
    // `thinking` is already shown as the reasoning above the call
    try {
      const v = JSON.parse(args);
      if (v && typeof v === "object" && !Array.isArray(v)) delete v.thinking;
      return JSON.stringify(v, null, 2);
    } catch (e) { return String(args == null ? "" : args); }
  }
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

  // ---- the context-window mark every message carries (same markup as templates/core/_ctx_mark.html)
  function ctxMark(mark) {
    if (!mark || mark.in) { const s = el("span", "ctx-mark in", "in context"); s.title = "In the model's context window now"; return s; }
    const s = el("span", "ctx-mark out");
    const ev = mark.evicted;
    if (ev && ev.by === "summary") {
      s.title = "Evicted from the context window by overflow; still searchable in recall memory";
      s.appendChild(document.createTextNode("out · evicted at "));
      if (ev.step_id) {
        const c = chip(ev.step_id, ev.step_index, "The summarizer step that evicted it");
        c.textContent += " · summarizer";
        s.appendChild(c);
      }
      else s.appendChild(document.createTextNode("overflow"));
    } else if (ev && ev.by === "reset") {
      s.textContent = "out · reset"; s.title = "Removed from the context window by a reset; still searchable in recall memory";
    } else { s.textContent = "out of context"; s.title = "Not in the model's context window; still searchable in recall memory"; }
    return s;
  }
  function chip(stepId, index, title) {
    const c = el("button", "step-chip", index == null ? "step" : "step " + index);
    c.type = "button"; c.dataset.step = stepId; c.title = title || "Show the payload sent at this step";
    return c;
  }
  function applyMark(node, mark) {
    node.dataset.ctx = mark.in ? "in" : "out";
    const old = node.querySelector(":scope > .meta > .ctx-mark, :scope > summary > .ctx-mark, :scope .divider-label > .ctx-mark");
    if (old) old.replaceWith(ctxMark(mark));
  }
  function refreshMarks() {
    const nodes = conv.querySelectorAll("[data-id][data-ctx]");
    if (!nodes.length) return;
    const first = conv.querySelector("[data-seq]");
    const sep = A.windowUrl.includes("?") ? "&" : "?";
    const url = A.windowUrl + (first ? sep + "since=" + encodeURIComponent(first.dataset.seq) : "");
    fetch(url, {credentials: "same-origin"}).then((r) => r.ok ? r.json() : null).then((data) => {
      if (!data) return;
      const inCtx = new Set(data.in_context);
      nodes.forEach((n) => applyMark(n, {in: inCtx.has(n.dataset.id), evicted: data.evicted[n.dataset.id]}));
    }).catch(() => {});
  }

  function shell(ev, label) {
    const box = el("div", "msg " + ev.message_type);
    box.dataset.type = ev.message_type;
    if (ev.id) { box.dataset.id = ev.id; box.dataset.ctx = "in"; }
    const meta = el("div", "meta");
    meta.appendChild(el("span", "", label));
    const sender = ev.sender_agent_id || ev.sender_id;
    if (sender) {
      box.classList.add("from-agent");
      const from = el("span", "sender", "· from agent ");
      const a = el("a", "sender-link", agentNames[sender] || sender);
      a.href = A.workspaceUrl.replace("AGENT", encodeURIComponent(sender));
      a.title = sender;
      from.appendChild(a);
      meta.appendChild(from);
    }
    meta.appendChild(el("span", "spacer"));
    if (ev.id) meta.appendChild(ctxMark({in: true}));
    if (ev.step_id) meta.appendChild(chip(ev.step_id, ev.step_index));
    meta.appendChild(el("span", "", time(ev.date)));
    box.appendChild(meta);
    return box;
  }

  function notice(ev, label, text) {
    const b = shell(ev, label);
    b.className = "msg notice";
    b.dataset.type = "notice";
    if (ev.kind) b.dataset.kind = ev.kind;
    b.appendChild(el("div", "body", text));
    return b;
  }
  function divider(ev) {
    const box = el("div", "divider summary");
    box.dataset.type = "summary"; box.dataset.id = ev.id; box.dataset.ctx = "in";
    const line = el("div", "divider-line");
    const label = el("span", "divider-label", "Context summarized");
    if (ev.step_id) { label.appendChild(document.createTextNode(" at ")); label.appendChild(chip(ev.step_id, ev.step_index, "The summarizer step")); }
    label.appendChild(document.createTextNode(" · older messages evicted "));
    label.appendChild(el("span", "muted", time(ev.date)));
    label.appendChild(document.createTextNode(" "));
    label.appendChild(ctxMark({in: true}));
    line.appendChild(label);
    box.appendChild(line);
    const det = el("details"); det.open = true;
    det.appendChild(el("summary", "small muted", "summary the model sees"));
    const text = String(ev.content || "");
    const at = text.indexOf(SUMMARY_SPLIT);
    det.appendChild(el("div", "body", at >= 0 ? text.slice(at + SUMMARY_SPLIT.length) : text));
    box.appendChild(det);
    return box;
  }

  const renderers = {
    user_message(ev) {
      if (ev.kind === "heartbeat") {
        const h = el("div", "msg heartbeat", "heartbeat — the agent asked to continue");
        h.dataset.type = "heartbeat"; h.title = ev.content || "";
        if (ev.id) { h.dataset.id = ev.id; h.dataset.ctx = "in"; }
        return h;
      }
      if (ev.kind === "summary") return divider(ev);
      if (ev.kind === "memory_warning") return notice(ev, "memory pressure warning", String(ev.content || "").replace(NON_USER_PREFIX, ""));
      if (ev.kind) return notice(ev, ev.kind.replace(/_/g, " "), String(ev.content || "").replace(NON_USER_PREFIX, ""));
      const b = shell(ev, "you"); b.appendChild(el("div", "body", ev.content));
      if (ev.otid) b.dataset.otid = ev.otid;
      return b;
    },
    system_message(ev) {
      const b = shell(ev, (ev.sender_agent_id || ev.sender_id) ? "message" : "system"); b.appendChild(el("div", "body", ev.content)); return b;
    },
    reasoning_message(ev) { const b = shell(ev, "reasoning"); b.appendChild(el("div", "body", ev.reasoning)); return b; },
    assistant_message(ev) { const b = shell(ev, "agent"); b.appendChild(el("div", "body", ev.content)); return b; },
    tool_call_message(ev) {
      const tc = ev.tool_call || {};
      shownCalls.add(tc.tool_call_id);
      const b = shell(ev, "tool call");
      const row = el("div", "row");
      row.appendChild(breakable(el("code"), tc.name));
      row.appendChild(el("span", "spacer"));
      if (ev.id && !ev.delta) {
        const a = el("a", "small open-workbench", "Open in workbench");
        a.href = A.toolsUrl + "?message=" + encodeURIComponent(ev.id) + "&call=" + encodeURIComponent(tc.tool_call_id || "");
        row.appendChild(a);
      }
      b.appendChild(row);
      b.appendChild(el("pre", "", ev.delta ? (tc.arguments || "") : pretty(tc.arguments)));
      return b;
    },
    tool_return_message(ev) {
      if (!shownCalls.has(ev.tool_call_id) && ev.status !== "error") return null;  // send_message's receipt
      const b = shell(ev, "tool return");
      if (ev.status === "error") b.classList.add("error");
      const det = el("details");
      if (ev.status === "error") det.open = true;
      const sum = el("summary");
      sum.appendChild(el("span", "badge " + (ev.status === "error" ? "err" : "ok"), ev.status || "success"));
      if (ev.name) sum.appendChild(document.createTextNode(" " + ev.name));
      det.appendChild(sum);
      det.appendChild(el("pre", "", ev.tool_return));
      for (const k of ["stdout", "stderr"]) {
        const v = ev[k];
        if (v && v.length) { det.appendChild(el("div", "muted small", k)); det.appendChild(el("pre", "", Array.isArray(v) ? v.join("") : v)); }
      }
      b.appendChild(det);
      return b;
    },
    error_message(ev) {
      const b = shell(ev, "error");
      const d = detailText(ev.detail);
      b.appendChild(el("div", "body", String(ev.message || "Something went wrong.") + (d ? "\n" + d : "")));
      return b;
    },
    stop_reason(ev) { return el("div", "msg stop_reason", "stop reason: " + ev.stop_reason); },
    usage_statistics(ev) {
      return el("div", "msg usage_statistics",
        `usage: ${ev.prompt_tokens} prompt + ${ev.completion_tokens} completion = ${ev.total_tokens} tokens · ${ev.step_count} step${ev.step_count === 1 ? "" : "s"}`);
    },
  };

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
  function onDelta(ev) {
    const t = ev.message_type, key = t + ":" + ev.id;
    let node = streaming.get(key);
    if (!node) {
      if (!renderers[t] || t === "tool_return_message") return;
      const start = Object.assign({}, ev, {content: "", reasoning: "", tool_call: Object.assign({}, ev.tool_call || {}, {arguments: ""})});
      node = renderers[t](start);
      if (!node) return;
      node.classList.add("streaming");
      if (catchingUp) node.classList.add("catching-up");  // joined mid-reply: its start comes with the snapshot
      streaming.set(key, node);
      dropEmpty();
      live.appendChild(node);
    }
    if (t === "tool_call_message" || t === "approval_request_message") {
      const tc = ev.tool_call || {};
      const code = node.querySelector("code");
      if (tc.name && code && !code.textContent) breakable(code, tc.name);
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
        onDelta(Object.assign({}, part, {delta: true, content: "", reasoning: "", tool_call: {name: part.name || "", arguments: ""}}));
      }
      const node = streaming.get(key);
      if (!node) continue;
      if (t === "tool_call_message" || t === "approval_request_message") {
        const code = node.querySelector("code");
        if (code && part.name) breakable(code, part.name);
        node.querySelector("pre").textContent = part.arguments || "";
      } else if (DELTA_FIELD[t]) node.querySelector(".body").textContent = part.text || "";
      node.classList.remove("catching-up");
      live.appendChild(node);  // in the order they streamed (a chunk since joining may have drawn a later part first)
    }
    catchingUp = false;
    scrollDown();
  }

  function bubble(text, state, note) {
    const p = shell({message_type: "user_message"}, "you");
    p.classList.add("pending");
    p.dataset.state = state;
    const n = el("span", "pending-label", note || "");
    p.querySelector(".meta .spacer").after(n);
    p.appendChild(el("div", "body", text));
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
    const r = renderers[t];
    if (!r) return;
    if (t === "user_message" && !ev.kind) {  // our own message arriving: it takes the pending bubble's place
      const bubbles = Array.from(live.querySelectorAll(".msg.user_message.pending"));
      const pending = bubbles.find((p) => ev.otid && p.dataset.otid === ev.otid) || bubbles.find((p) =>
        p.querySelector(".body").textContent === ev.content && (!p.dataset.run || !ev.run_id || p.dataset.run === ev.run_id));
      // a copy left undelivered by an earlier failed run (here or in another tab) has now arrived
      live.querySelectorAll(".msg.user_message.failed").forEach((f) => {
        if (f.querySelector(".body").textContent === ev.content) f.remove();
      });
      if (pending) { pending.replaceWith(r(ev)); scrollDown(true); return; }
    }
    const node = r(ev);
    if (!node) return;
    dropEmpty();
    const waiting = t === "user_message" && ev.kind === "summary" &&
      Array.from(live.querySelectorAll(".msg.user_message.pending")).find((p) => !p.dataset.run || p.dataset.run === ev.run_id);
    if (waiting) live.insertBefore(node, waiting);  // the eviction happened before this input was stored
    else place(node, ev.id ? t + ":" + ev.id : null);
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
  function showCalls(ids) { ids.forEach((id) => shownCalls.add(id)); }  // calls whose results the page shows
  function dropStreams() { streaming.forEach((n) => n.remove()); streaming.clear(); }  // their messages never came

  return {catchUp, onSnapshot, el, short, pretty, detailText, scrollDown, dropEmpty, bump, bubble, setBubble, failBubble, place, onDelta, render,
          renderers, refreshMarks, trailingStatus, reset, dropStreams, showCalls, live};
})();
