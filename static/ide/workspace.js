// Agent workspace, the run side: the websocket (events of every run of the agent, token chunks included), the
// run state, the composer (busy, queue, retry) and what a run that did not complete leaves behind.
(function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const C = window.AIDE_CONV;
  const W = window.AIDE_WAITS;
  const {el, short, detailText, scrollDown, bump, bubble, setBubble, failBubble, place, onDelta, render,
         refreshMarks, trailingStatus, live} = C;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const conv = $("#conversation");
  const input = $("#composer-input");
  const statusEl = $("#run-status");
  const cancelBtn = $("#cancel-run");
  const sendBtn = $("#send-btn");
  const busyBar = $("#busy-bar");
  // what this socket asked for, oldest first: {kind: "send", bubble} | {kind: "answer", card, stop} |
  // {kind: "cancel"} (card: a wait's card, waits.js; stop: a Stop, answered by the ended run)
  const awaiting = [];
  let ws = null, retry = 0, running = false, cancelling = false, activeRunId = A.activeRunId || null, outbox = [];
  let queued = null;  // {text, bubble}: sent when the active run ends
  const ended = new Set();  // runs whose end we saw (it can overtake the reply that names the run)

  // ---- what this browser sent that the server has not confirmed, and the text being typed: kept in localStorage
  // so a reload (or a crash) loses neither. A send leaves the store once the server accepts it: from then on the
  // server holds it (core.web.history.in_flight, then the stored message).
  const where = A.agentId + ":" + (A.conversationId || "");
  const SENDS = "aide:sends:" + where, DRAFT = "aide:draft:" + where;
  function sendsRead() { try { const v = JSON.parse(localStorage.getItem(SENDS) || "[]"); return Array.isArray(v) ? v : []; } catch (e) { return []; } }
  function sendsWrite(list) {
    try { if (list.length) localStorage.setItem(SENDS, JSON.stringify(list.slice(-20))); else localStorage.removeItem(SENDS); } catch (e) { /* private mode, full */ }
  }
  function keep(otid, text, state, error) {
    if (!otid) return;
    sendsWrite(sendsRead().filter((s) => s.otid !== otid).concat([{otid: otid, text: text, state: state, error: error || "", at: Date.now()}]));
  }
  function forget(otid) { if (otid) sendsWrite(sendsRead().filter((s) => s.otid !== otid)); }
  function draftKeep() { try { if (input.value) localStorage.setItem(DRAFT, input.value); else localStorage.removeItem(DRAFT); } catch (e) { /* ignore */ } }

  // ---- run state
  function showCancelling() {
    statusEl.textContent = "";
    statusEl.appendChild(el("span", "spinner"));
    statusEl.appendChild(el("span", "", " cancelling…"));
    statusEl.title = "The run stops at the end of its current step.";
    statusEl.dataset.state = "cancelling";
    cancelBtn.disabled = true;
  }
  let lastLabel = "idle";  // what the status line says when no run is going and no reply waits
  function setRunning(on, label) {
    running = on;
    if (!on) lastLabel = label || "idle";
    if (!on) { cancelling = false; activeRunId = null; }
    document.body.dataset.run = on ? "busy" : "idle";
    sendBtn.textContent = on ? "Send…" : "Send";
    sendBtn.title = on ? "A run is in progress: you can cancel it or have this message sent when it ends" : "";
    input.placeholder = on ? "The agent is busy with a run; you can type the next message now." : input.dataset.idlePlaceholder;
    if (on && cancelling) { cancelBtn.hidden = false; showCancelling(); return; }  // a late "running" event
    statusEl.textContent = "";
    statusEl.title = "";
    if (on) {
      statusEl.appendChild(el("span", "spinner"));
      statusEl.appendChild(el("span", "", " running" + (activeRunId ? " " + short(activeRunId) : "") + "…"));
    } else statusEl.appendChild(el("span", "muted", label || "idle"));
    statusEl.dataset.state = on ? "running" : (label || "idle");
    cancelBtn.hidden = !on;
    cancelBtn.disabled = false;
    cancelBtn.title = "";
    if (!on) { hideBusy(); markWaiting(); }
  }
  function waitLabel(w) {  // what a run that paused waits for (run_status `waiting`)
    if (w.kind === "client") return "waiting for the client";
    if (w.kind === "breakpoint") return "paused at a breakpoint";
    return "waiting for approval";
  }
  // a reply waits for an answer, or a breakpoint holds a run (a card in the conversation): say so, and offer Cancel,
  // which denies the waiting calls (or ends the pause)
  function waitingCard() { return W.waiting(); }
  function markWaiting() {
    const card = waitingCard();
    document.body.dataset.wait = card ? (card.classList.contains("pause-card") ? "pause" : "approval") : "none";
    if (!card || running) return;
    statusEl.textContent = "";
    const client = card.querySelector(".approval-call") && !card.querySelector(".approval-call:not([data-why=client])");
    const paused = card.classList.contains("pause-card") || card.dataset.breakpoint;
    statusEl.appendChild(el("span", "badge waiting", paused ? "paused at a breakpoint" : (client ? "waiting for the client" : "waiting for approval")));
    statusEl.title = paused
      ? "A breakpoint holds the run: Continue, Step or Stop it in the conversation."
      : "A reply waits for your answer: approve or deny its tool calls in the conversation, or cancel the run to deny them.";
    statusEl.dataset.state = "waiting";
    cancelBtn.hidden = false;
    cancelBtn.disabled = false;
    cancelBtn.title = card.classList.contains("pause-card") ? "End the pause: the run stops here" : "Deny the waiting tool calls and end the wait";
  }
  function waitChanged() {
    if (running) return;
    if (waitingCard()) markWaiting();
    else if (statusEl.dataset.state === "waiting") setRunning(false, /^(waiting for|paused)/.test(lastLabel) ? "idle" : lastLabel);
  }
  W.hooks.changed = waitChanged;
  W.hooks.send = (card, msg, stop) => {  // from a card: its reply (a run, the ended run or a refusal) goes back to it
    const otid = "otid-" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
    awaiting.push({kind: "answer", card: card, otid: otid, stop: !!stop});
    send(Object.assign({}, msg, {otid: otid}));
  };
  function refreshContext() { bump("context-changed"); }

  let runsTimer = null;
  function runsChanged() {  // one refresh for a burst of events
    clearTimeout(runsTimer);
    runsTimer = setTimeout(() => bump("runs-changed"), 150);
  }

  function sendText(text, existing) {
    const p = existing || bubble(text, "sending", "sending…");
    if (existing) setBubble(p, "sending", "sending…");
    // the otid names this send, so a server that echoes it ties its reply to this bubble whatever else arrives
    const otid = "otid-" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
    forget(p.dataset.otid);  // a retry: the failed copy it replaces
    p.dataset.otid = otid;
    keep(otid, text, "sending");
    awaiting.push({kind: "send", bubble: p, otid: otid});
    send({type: "user_message", text: text, otid: otid});
    setRunning(true);
  }

  function busyMode(mode) {  // "busy": a run holds the agent; "waiting": a reply waits for an approval
    busyBar.dataset.mode = mode;
    $("#busy-queue").hidden = mode !== "busy";
    $("#busy-show").hidden = mode !== "waiting";
    $("#busy-cancel").textContent = mode === "waiting" ? "Cancel it (deny)" : "Cancel it";
  }
  function showBusy(runId, text) {
    busyMode("busy");
    $("#busy-text").textContent = "The agent is busy with run " + (runId ? short(runId) : "(starting)") + ".";
    busyBar.dataset.run = runId || "";
    busyBar.hidden = false;
    if (text && !input.value.trim()) input.value = text;  // never lose what was typed
  }
  function showPending(ev, text) {  // the server's 409: a reply waits for an answer first
    busyMode("waiting");
    const calls = (ev.detail.tool_calls || []).map((c) => c && c.name).filter(Boolean);
    const named = calls.length ? calls : W.names(W.waiting());
    $("#busy-text").textContent = (!calls.length && W.waiting() && W.waiting().classList.contains("pause-card")
      ? "The agent is paused at a breakpoint before a model call: Continue, Step or Stop it first."
      : String(ev.message || "The agent is waiting for approval on a tool call.") + (named.length ? " Waiting: " + named.join(", ") + "." : "")) +
      " Your message is back in the box.";
    busyBar.dataset.run = ev.detail.run_id || "";
    busyBar.hidden = false;
    if (text && !input.value.trim()) input.value = text;
    markWaiting();
  }
  function hideBusy() { busyBar.hidden = true; }

  // ---- replies to this socket (sent in the order we asked) and events of every run of the agent
  function onReply(ev) {
    // else replies come in order (an answer's reply always names its otid)
    const at = ev.otid ? awaiting.findIndex((a) => a.otid === ev.otid) : awaiting.findIndex((a) => a.kind !== "answer");
    const head = at >= 0 ? awaiting[at] : null;
    const take = () => awaiting.splice(at, 1);
    if (head && head.kind === "answer" && (ev.message_type === "run_status" || ev.message_type === "error_message")) {
      take();
      if (ev.message_type === "error_message") { W.refused(head.card, ev); return true; }
      runsChanged();
      W.accepted(head.card, ev.run_id);
      if (head.stop) { W.refresh(); return true; }  // a Stop: the run ended, nothing goes on
      if (!ended.has(ev.run_id)) { activeRunId = ev.run_id; setRunning(true); }
      return true;
    }
    if (ev.message_type === "run_status" && ev.status === "created" && head && head.kind === "send") {
      take();
      runsChanged();
      forget(head.otid);
      if (ended.has(ev.run_id)) {  // it already ended: its notice (or the stored message) replaced this bubble
        if (head.bubble.classList.contains("pending")) head.bubble.remove();
        return true;
      }
      forget(head.otid);
      head.bubble.dataset.run = ev.run_id;
      setBubble(head.bubble, "sent", "");
      activeRunId = ev.run_id;
      setRunning(true);
      return true;
    }
    if (ev.message_type === "error_message" && !ev.run_id && head) {
      take();
      if (head.kind === "cancel") { setRunning(false); render(ev); return true; }
      const busy = ev.detail && typeof ev.detail === "object" && ev.detail.run_id;
      if (head.kind === "send") forget(head.otid);
      if (busy && ev.detail.code === "PENDING_APPROVAL") {  // nothing is lost: the text goes back to the composer
        const text = head.bubble.querySelector(".body").textContent;
        head.bubble.remove();
        if (!awaiting.some((a) => a.kind === "send")) setRunning(false, "not sent");
        showPending(ev, text);
      } else if (busy) {  // another run holds the agent: the text goes back to the composer, nothing is lost
        const text = head.bubble.querySelector(".body").textContent;
        head.bubble.remove();
        activeRunId = busy;
        setRunning(true);
        showBusy(busy, text);
      } else {
        const why = String(ev.message || "") + (detailText(ev.detail) ? " " + detailText(ev.detail) : "");
        keep(head.otid, head.bubble.querySelector(".body").textContent, "failed", why);
        failBubble(head.bubble, why);
        if (!awaiting.some((a) => a.kind === "send")) setRunning(false, "not sent");
      }
      return true;
    }
    if (ev.message_type === "cancel_requested" && head && head.kind === "cancel") { take(); if (running) showCancelling(); return true; }
    return false;
  }

  function onRunStatus(ev) {
    const active = ev.status === "running" || ev.status === "created";
    runsChanged();
    W.refresh(".pause-card");  // a pause may have been let go (a Continue from any tab starts a run) or ended
    if (ev.waiting && ev.waiting.before === "model_call") W.arrived(ev);
    if (active) {
      activeRunId = ev.run_id;
      setRunning(true);
      return;
    }
    ended.add(ev.run_id);
    // a wait ended by Stop leaves its run "completed" with stop reason "cancelled": say what the person saw happen
    const cancelled = ev.stop_reason === "cancelled";
    const why = ev.stop_reason && ev.stop_reason !== ev.status && !cancelled ? " · " + ev.stop_reason : "";
    setRunning(false, ev.waiting ? waitLabel(ev.waiting) : (cancelled ? "cancelled" : ev.status + why));
    W.refresh(".approval-card");  // a card that waited may have been answered, cancelled or expired
    refreshContext();
    refreshMarks();
    C.dropStreams();
    if (ev.status !== "completed") showNotice(ev);
    if (queued) { const q = queued; queued = null; sendText(q.text, q.bubble); }
  }

  // the person's inputs a run was given, from this tab, another tab or the API: each shows at once, and the stored
  // message takes its place when the run's first step commits
  function inputsShown(ev) {
    for (const item of ev.inputs || []) {
      if (item.otid && conv.querySelector(`.msg.user_message[data-otid="${CSS.escape(item.otid)}"]`)) continue;  // ours
      const p = bubble(item.content, "sent", "sent from another tab or the API · waiting for the agent");
      p.dataset.run = ev.run_id;
      if (item.otid) p.dataset.otid = item.otid;
      forget(item.otid);
    }
  }

  function showNotice(ev) {
    const mine = live.querySelectorAll(`.msg.pending[data-run="${CSS.escape(ev.run_id)}"]`);
    fetch(A.noticeUrl.replace("RUN", encodeURIComponent(ev.run_id)), {credentials: "same-origin"})
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        const box = el("div");
        box.innerHTML = html;  // server-rendered (autoescaped) template
        const node = box.firstElementChild;
        const anchor = Array.from(mine).find((m) => m.isConnected) || trailingStatus();
        if (anchor) anchor.before(node); else place(node);
        mine.forEach((m) => m.remove());
      })
      .catch(() => {  // the page must still end usable: mark our own message and say what we know
        mine.forEach((m) => {
          keep(m.dataset.otid, m.querySelector(".body").textContent, "failed", ev.error || ("The run " + ev.status + "."));
          failBubble(m, ev.error || ("The run " + ev.status + "."));
        });
        place(C.note("Run " + short(ev.run_id) + " " + ev.status + (ev.error ? ": " + ev.error : ".")));
      })
      .finally(() => scrollDown(true));
  }

  function handle(ev, direct) {
    const t = ev.message_type;
    if (t === "pong") return;
    if (direct && onReply(ev)) return;
    if (t === "cancel_requested") { if (running) showCancelling(); return; }
    if (t === "run_status") { onRunStatus(ev); return; }
    if (t === "block_update") { window.AIDE_BLOCKS && window.AIDE_BLOCKS.update(ev.block); refreshContext(); return; }
    if (t === "context_update") { refreshContext(); runsChanged(); return; }
    if (t === "input_accepted") { inputsShown(ev); return; }
    if (t === "stream_snapshot") { C.onSnapshot(ev); return; }
    if (t === "agent_test_result" || t === "agent_test_run") {  // the Tests tab (agent_tests.js) re-reads its run
      document.body.dispatchEvent(new CustomEvent("aide:agent-test", {detail: ev}));
      return;
    }
    if (t === "error_message" && ev.run_id) return;  // the run's notice shows it when the run ends
    if (ev.delta) { onDelta(ev); return; }
    render(ev);
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    // batch=1: every frame is an array of events (a run's batch of events in one frame)
    const thread = A.conversationId ? "&conversation=" + encodeURIComponent(A.conversationId) : "";
    ws = new WebSocket(proto + location.host + "/ws/agents/" + encodeURIComponent(A.agentId) + "/?batch=1" + thread);
    ws.onopen = () => {
      retry = 0; document.body.dataset.ws = "open"; while (outbox.length) ws.send(outbox.shift());
      W.refresh();  // what changed while the socket was away
      if (running) C.catchUp(true);  // a reply streaming now: its snapshot comes (the server was asked on connect)
      if (opened++) missedFetch();
    };
    ws.onmessage = (m) => {
      let events; try { events = JSON.parse(m.data); } catch (e) { return; }
      for (const ev of Array.isArray(events) ? events : [events]) {
        if (!ev || typeof ev !== "object") continue;
        // replies to this socket carry no run id, or are the "created" status of the run we asked for
        const direct = ev.otid ? awaiting.some((a) => a.otid === ev.otid) :
          (ev.message_type === "run_status" && ev.status === "created") ||
          (ev.message_type === "error_message" && !ev.run_id) || ev.message_type === "cancel_requested";
        try { handle(ev, direct); } catch (e) { console.error("event", ev.message_type, e); }  // the batch's others still show
      }
    };
    ws.onclose = () => {
      document.body.dataset.ws = "closed";
      setTimeout(connect, Math.min(10000, 500 * 2 ** retry++));
    };
  }
  let opened = 0;
  function missedFetch() {  // the socket was away: the messages stored meanwhile, and whether the run ended
    const seqs = Array.from(conv.querySelectorAll("[data-seq]")).map((n) => Number(n.dataset.seq)).filter((n) => n >= 0);
    const last = seqs.length ? Math.max(...seqs) : 0;
    const sep = A.historyUrl.includes("?") ? "&" : "?";
    fetch(A.historyUrl + sep + "after=" + last, {credentials: "same-origin"})
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        const box = el("div");
        box.innerHTML = html;  // server-rendered (autoescaped) items
        for (const node of Array.from(box.children)) {
          const id = node.dataset.id;
          if (!id || conv.querySelector(`[data-id="${CSS.escape(id)}"]:not(.streaming)`)) continue;
          if (node.matches(".msg.user_message")) {  // it takes its bubble's place
            const b = node.dataset.otid && live.querySelector(`.msg.user_message.pending[data-otid="${CSS.escape(node.dataset.otid)}"]`);
            if (b) { b.replaceWith(node); continue; }
          }
          place(node, node.dataset.type + ":" + id);
        }
        runsChanged(); refreshContext();
      })
      .catch(() => {});
  }
  function send(obj) {
    const data = JSON.stringify(obj);
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(data); else outbox.push(data);
  }

  // ---- composer: Enter sends, Shift+Enter is a new line; while a run is going, ask before doing anything
  input.dataset.idlePlaceholder = input.placeholder;
  $("#composer").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    if (running) { showBusy(activeRunId, null); return; }
    input.value = "";
    draftKeep();
    sendText(text);
  }
  input.addEventListener("input", draftKeep);
  cancelBtn.addEventListener("click", () => { cancelling = true; showCancelling(); awaiting.push({kind: "cancel"}); send({type: "cancel"}); });
  $("#busy-cancel").addEventListener("click", () => { hideBusy(); cancelBtn.click(); });
  document.addEventListener("click", (e) => {  // the runs view's Cancel on a run in progress (one at a time per agent)
    const b = e.target.closest("[data-cancel-run]");
    if (!b) return;
    b.disabled = true; b.textContent = "cancelling…";
    if (!running && !b.hasAttribute("data-waiting")) { activeRunId = b.dataset.cancelRun; setRunning(true); }
    cancelBtn.click();
  });
  $("#busy-dismiss").addEventListener("click", () => { hideBusy(); input.focus(); });
  $("#busy-show").addEventListener("click", () => { hideBusy(); W.reveal(); });
  $("#busy-queue").addEventListener("click", () => {
    const text = input.value;
    hideBusy();
    if (!text.trim()) return;
    input.value = "";
    if (queued) { queued.bubble.remove(); queued.text += "\n" + text; } else queued = {text: text};
    queued.bubble = bubble(queued.text, "queued", "queued: sent when run " + short(activeRunId) + " ends");
    if (!running) { const q = queued; queued = null; sendText(q.text, q.bubble); }
  });
  // Retry / Edit on a message that was not delivered
  conv.addEventListener("click", (e) => {
    const failed = e.target.closest(".msg.user_message.failed");
    if (!failed) return;
    const text = failed.querySelector(".body").textContent;
    if (e.target.closest("[data-retry]")) {
      forget(failed.dataset.otid);
      if (running) { showBusy(activeRunId, text); return; }
      const holder = failed.closest(".run-notice") || failed;
      const p = bubble(text, "sending", "sending…");
      holder.after(p);
      failed.remove();
      sendText(text, p);
    } else if (e.target.closest("[data-edit]")) {
      input.value = text; draftKeep(); input.focus();
    }
  });

  // an htmx reset re-renders the whole history, which then holds what was shown live
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.target.id === "history" && e.detail.requestConfig && e.detail.requestConfig.verb === "post") {
      C.reset(); scrollDown(true);
    }
  });
  // step chips the server rendered before a step's number was known get it from the steps list
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.target.id !== "steps-list") return;
    const index = {};
    e.target.querySelectorAll(".step-chip[data-step]").forEach((c) => { index[c.dataset.step] = c.dataset.index; });
    conv.querySelectorAll(".step-chip[data-step]").forEach((c) => {
      if (c.textContent === "step" && index[c.dataset.step]) c.textContent = "step " + index[c.dataset.step];
    });
  });

  setRunning(!!A.activeRunId);
  if (A.activeRunId) activeRunId = A.activeRunId;
  // what the thread's run in progress was given (a reload or another tab sent it): shown as this tab shows a send
  if (A.inFlight) inputsShown({run_id: A.inFlight.runId, inputs: A.inFlight.inputs.map((i) => ({content: i.text, otid: i.otid}))});
  conv.querySelectorAll(".msg.user_message.pending").forEach((p) => setBubble(p, "sent", "sent · waiting for the agent"));
  // sends this browser made that the server never confirmed, or refused: back, with Retry and Edit
  for (const s of sendsRead()) {
    if (conv.querySelector(`.msg.user_message[data-otid="${CSS.escape(s.otid)}"]`)) { forget(s.otid); continue; }
    const p = bubble(s.text, "failed", "");
    p.dataset.otid = s.otid;
    failBubble(p, s.error || "The page closed before the server confirmed this message: it was not delivered.");
  }
  try { const d = localStorage.getItem(DRAFT); if (d && !input.value) input.value = d; } catch (e) { /* ignore */ }
  scrollDown(true);
  connect();
  // The conversation picker opens the chosen thread (without script, its form has an Open button).
  const threadSelect = $("#thread-select");
  if (threadSelect) threadSelect.addEventListener("change", () => threadSelect.form.submit());
})();
