// Agent workspace, the run side: the websocket (events of every run of the agent, token chunks included; the page
// sends nothing over it), the run state, the composer (busy, queue, retry) and what a run that did not complete
// leaves behind. A send or a cancel is posted (core.web.ws_handlers). Texts come from the server: a run_status's
// `label`, an error's `reason` and `busy_text` (core.web.live), a wait card's data-label.
(function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const C = window.AIDE_CONV, W = window.AIDE_WAITS, live = C.live;
  const $ = (id) => document.getElementById(id);
  const conv = $("conversation"), input = $("composer-input"), statusEl = $("run-status"), cancelBtn = $("cancel-run");
  const busyBar = $("busy-bar"), idlePlaceholder = input.placeholder;
  const ended = new Set();  // runs whose end we saw (it can overtake the answer that names the run)
  let retry = 0, opened = 0, running = false, cancelling = false, activeRunId = A.activeRunId || null;
  let sending = 0, queued = null;  // sends posted and not answered yet; queued: {text, bubble}, sent when the run ends
  const newOtid = () => "otid-" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8);

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
    if (otid) sendsWrite(sendsRead().filter((s) => s.otid !== otid).concat([{otid, text, state, error: error || "", at: Date.now()}]));
  }
  function forget(otid) { if (otid) sendsWrite(sendsRead().filter((s) => s.otid !== otid)); }
  function draftKeep() { try { if (input.value) localStorage.setItem(DRAFT, input.value); else localStorage.removeItem(DRAFT); } catch (e) { /* ignore */ } }

  // ---- run state: the status line (a spinner while a run goes, its label a badge while one waits), Send, Cancel
  function status(state, text, title) {
    statusEl.dataset.state = state;
    statusEl.lastElementChild.textContent = text;
    statusEl.title = title || "";
  }
  let lastLabel = "idle";  // what the status line says when no run is going and no reply waits
  function setRunning(on, label) {
    running = on;
    document.body.dataset.run = on ? "busy" : "idle";
    $("send-btn").textContent = on ? "Send…" : "Send";
    $("send-btn").title = on ? "A run is in progress: you can cancel it or have this message sent when it ends" : "";
    input.placeholder = on ? "The agent is busy with a run; you can type the next message now." : idlePlaceholder;
    Object.assign(cancelBtn, {hidden: !on, disabled: false, title: ""});
    if (on && cancelling) { cancelShown(); return; }  // a late "running" event
    if (on) { status("running", label || "running" + (activeRunId ? " " + C.short(activeRunId) : "") + "…"); return; }
    cancelling = false; activeRunId = null; lastLabel = label || "idle";
    status(lastLabel, lastLabel);
    busyBar.hidden = true;
    markWaiting();
  }
  function cancelShown() {
    cancelling = true;
    cancelBtn.disabled = true;
    status("cancelling", "cancelling…", "The run stops at the end of its current step.");
  }
  // a reply waits for an answer, or a breakpoint holds a run (a card in the conversation): say so, and offer Cancel,
  // which denies the waiting calls (or ends the pause)
  function markWaiting() {
    const card = W.waiting();
    document.body.dataset.wait = card ? (card.matches(".wait-model-call") ? "pause" : "approval") : "none";
    if (!card || running) return;
    status("waiting", card.dataset.label || "waiting for approval", card.dataset.hint);
    Object.assign(cancelBtn, {hidden: false, disabled: false, title: card.dataset.cancel || ""});
  }
  W.hooks.changed = () => {
    if (running) return;
    if (W.waiting()) markWaiting();
    else if (statusEl.dataset.state === "waiting") setRunning(false, /^(waiting for|paused)/.test(lastLabel) ? "idle" : lastLabel);
  };
  W.hooks.started = (runId) => {  // a card's answer started a run (core.web.waits): it goes on as any run
    runsChanged();
    if (ended.has(runId)) W.refresh(); else { activeRunId = runId; setRunning(true); }
  };
  const refreshContext = () => C.bump("context-changed");
  let runsTimer = null;
  function runsChanged() { clearTimeout(runsTimer); runsTimer = setTimeout(() => C.bump("runs-changed"), 150); }  // one for a burst

  // ---- a send or a cancel, posted: the answer is the event the socket would have replied with (core.web.live's texts)
  function post(url, fields) {
    const headers = {"X-CSRFToken": JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""};
    // redirect: "error": a session that ended sends the login page, which is no answer
    return fetch(url, {method: "POST", credentials: "same-origin", redirect: "error", headers, body: new URLSearchParams(fields)})
      .then((r) => r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status)));
  }
  function sendText(text, existing) {
    const p = existing || C.bubble(text, "sending", "sending…");
    C.setBubble(p, "sending", "sending…");
    // the otid names this send: the events of its run carry it, which ties them to this bubble whatever else arrives
    const otid = newOtid();
    forget(p.dataset.otid);  // a retry: the failed copy it replaces
    p.dataset.otid = otid;
    keep(otid, text, "sending");
    sending++;
    setRunning(true);
    post(A.sendUrl, {text, otid})
      .catch((e) => ({message_type: "error_message", reason: `The server did not take this message (${e.message}).`}))
      .then((ev) => { sending--; sent(p, otid, text, ev); });
  }

  // ---- the busy bar: "busy", a run holds the agent; "waiting", a reply waits for an answer (the server's 409)
  function showBusy(mode, text, runId, typed) {
    Object.assign(busyBar.dataset, {mode, run: runId || ""});  // what it offers: ide.css
    $("busy-text").textContent = text;
    busyBar.hidden = false;
    if (typed && !input.value.trim()) input.value = typed;  // never lose what was typed
  }
  const busyText = (runId) => "The agent is busy with run " + (runId ? C.short(runId) : "(starting)") + ".";

  // ---- what the server answered a send: its run, or why not (another run holds the agent, a reply waits, a refusal)
  function sent(p, otid, text, ev) {
    forget(otid);
    if (ev.message_type === "run_status") {
      runsChanged();
      if (ended.has(ev.run_id)) {  // it already ended: its notice (or the stored message) replaced this bubble
        if (p.classList.contains("pending")) p.remove();
        return;
      }
      p.dataset.run = ev.run_id;
      C.setBubble(p, "sent", "");
      activeRunId = ev.run_id;
      setRunning(true, ev.label);
      return;
    }
    const busy = ev.detail && typeof ev.detail === "object" && ev.detail.run_id;
    if (busy) p.remove();  // nothing is lost: the text goes back to the composer
    if (busy && ev.busy_text) {  // a reply waits for an answer first
      if (!sending) setRunning(false, "not sent");
      showBusy("waiting", ev.busy_text, busy, text);
      markWaiting();
    } else if (busy) {  // another run holds the agent
      activeRunId = busy;
      setRunning(true);
      showBusy("busy", busyText(busy), busy, text);
    } else {
      keep(otid, text, "failed", ev.reason);
      C.failBubble(p, ev.reason);
      if (!sending) setRunning(false, "not sent");
    }
  }
  function cancelRun() {
    cancelShown();
    post(A.cancelUrl, {}).then((ev) => {
      if (ev.message_type === "cancel_requested") return;
      setRunning(false);  // nothing to cancel: the error says so
      C.render(ev);
    }).catch((e) => {
      C.before(C.note(`The cancel did not reach the server (${e.message}): try again.`));
      cancelling = false;
      setRunning(running);
    });
  }

  function onRunStatus(ev) {
    runsChanged();
    if (ev.waiting && ev.waiting.before === "model_call") W.arrived(ev);
    if (ev.status === "running" || ev.status === "created") {
      W.refresh(true);  // a pause may have been let go (a Continue from any tab starts a run)
      activeRunId = ev.run_id; setRunning(true, ev.label); return;
    }
    ended.add(ev.run_id);
    setRunning(false, ev.label);
    W.refresh();  // a card that waited may have been answered, cancelled or expired, a pause let go or ended
    refreshContext();
    C.refreshMarks();
    C.dropStreams();
    if (ev.status !== "completed") showNotice(ev);
    if (queued) { const q = queued; queued = null; sendText(q.text, q.bubble); }
  }

  // the person's inputs a run was given, from this tab, another tab or the API: each shows at once, and the stored
  // message takes its place when the run's first step commits
  function inputsShown(ev) {
    for (const item of ev.inputs || []) {
      if (item.otid && C.at('.msg.user_message[data-otid="?"]', item.otid)) continue;  // ours
      const p = C.bubble(item.content, "sent", "sent from another tab or the API · waiting for the agent");
      p.dataset.run = ev.run_id;
      if (item.otid) p.dataset.otid = item.otid;
      forget(item.otid);
    }
  }

  function showNotice(ev) {  // the server's notice of a run that did not complete (core.web.live), in place of its inputs
    const mine = Array.from(live.querySelectorAll(`.msg.pending[data-run="${CSS.escape(ev.run_id)}"]`));
    const [node] = C.nodes(ev.html);
    if (!node) return;
    C.before(node, mine.find((m) => m.isConnected) || C.trailingStatus());
    mine.forEach((m) => m.remove());
  }

  function handle(ev) {
    const t = ev.message_type;
    if (t === "cancel_requested") { if (running) cancelShown(); return; }
    if (t === "run_status") { onRunStatus(ev); return; }
    if (t === "block_update") { if (window.AIDE_BLOCKS) window.AIDE_BLOCKS.update(ev.block); refreshContext(); return; }
    if (t === "context_update") { refreshContext(); runsChanged(); return; }
    if (t === "input_accepted") { inputsShown(ev); return; }
    if (t === "stream_snapshot") { C.onSnapshot(ev); return; }
    if (t === "agent_test_result" || t === "agent_test_run") {  // the Tests tab (agent_tests.js) re-reads its run
      document.body.dispatchEvent(new CustomEvent("aide:agent-test", {detail: ev}));
      return;
    }
    if (t === "error_message" && ev.run_id) return;  // the run's notice shows it when the run ends
    if (ev.delta) C.onDelta(ev); else C.render(ev);
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    // batch=1: every frame is an array of events (a run's batch of events in one frame)
    const thread = A.conversationId ? "&conversation=" + encodeURIComponent(A.conversationId) : "";
    const ws = new WebSocket(proto + location.host + "/ws/agents/" + encodeURIComponent(A.agentId) + "/?batch=1" + thread);
    ws.onopen = () => {
      retry = 0; document.body.dataset.ws = "open";
      W.refresh();  // what changed while the socket was away
      if (running) C.catchUp(true);  // a reply streaming now: its snapshot comes (the server was asked on connect)
      if (opened++) { missedFetch(); C.bump("socket-reopened"); }  // test runs read themselves again (agent_tests.js)
    };
    ws.onmessage = (m) => {
      let events; try { events = JSON.parse(m.data); } catch (e) { return; }
      for (const ev of Array.isArray(events) ? events : [events]) {
        if (!ev || typeof ev !== "object") continue;
        try { handle(ev); } catch (e) { console.error("event", ev.message_type, e); }  // the batch's others still show
      }
    };
    ws.onclose = () => { document.body.dataset.ws = "closed"; setTimeout(connect, Math.min(10000, 500 * 2 ** retry++)); };
  }
  function missedFetch() {  // the socket was away: the messages stored meanwhile, and whether the run ended
    const seqs = Array.from(conv.querySelectorAll("[data-seq]"), (n) => Number(n.dataset.seq)).filter((n) => n >= 0);
    const url = A.historyUrl + (A.historyUrl.includes("?") ? "&" : "?") + "after=" + (seqs.length ? Math.max(...seqs) : 0);
    C.load(url).then((nodes) => {
      for (const node of nodes) {
        const id = node.dataset.id;
        if (!id || C.at('[data-id="?"]:not(.streaming)', id)) continue;
        // the person's message takes its bubble's place
        const b = node.matches(".msg.user_message") && node.dataset.otid && C.at('#live .msg.user_message.pending[data-otid="?"]', node.dataset.otid);
        if (b) b.replaceWith(node); else C.place(node, node.dataset.type + ":" + id);
      }
      runsChanged(); refreshContext();
    }).catch(() => {});
  }

  // ---- composer: Enter sends, Shift+Enter is a new line; while a run is going, ask before doing anything
  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    if (running) { showBusy("busy", busyText(activeRunId), activeRunId); return; }
    input.value = "";
    draftKeep();
    sendText(text);
  }
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  input.addEventListener("input", draftKeep);
  cancelBtn.addEventListener("click", cancelRun);
  document.addEventListener("click", (e) => {  // the runs view's Cancel on a run in progress (one at a time per agent)
    const b = e.target.closest("[data-cancel-run]");
    if (!b) return;
    b.disabled = true; b.textContent = "cancelling…";
    if (!running && !b.hasAttribute("data-waiting")) { activeRunId = b.dataset.cancelRun; setRunning(true); }
    cancelBtn.click();
  });
  $("busy-cancel").addEventListener("click", () => { busyBar.hidden = true; cancelBtn.click(); });
  $("busy-dismiss").addEventListener("click", () => { busyBar.hidden = true; input.focus(); });
  $("busy-show").addEventListener("click", () => { busyBar.hidden = true; W.reveal(); });
  $("busy-queue").addEventListener("click", () => {
    const text = input.value;
    busyBar.hidden = true;
    if (!text.trim()) return;
    input.value = "";
    if (queued) { queued.bubble.remove(); queued.text += "\n" + text; } else queued = {text};
    queued.bubble = C.bubble(queued.text, "queued", "queued: sent when run " + C.short(activeRunId) + " ends");
    if (!running) { const q = queued; queued = null; sendText(q.text, q.bubble); }
  });
  conv.addEventListener("click", (e) => {  // Retry / Edit on a message that was not delivered
    const failed = e.target.closest(".msg.user_message.failed");
    if (!failed) return;
    const text = C.bodyOf(failed);
    if (e.target.closest("[data-retry]")) {
      forget(failed.dataset.otid);
      if (running) { showBusy("busy", busyText(activeRunId), activeRunId, text); return; }
      const p = C.bubble(text, "sending", "sending…");
      (failed.closest(".run-notice") || failed).after(p);
      failed.remove();
      sendText(text, p);
    } else if (e.target.closest("[data-edit]")) {
      input.value = text; draftKeep(); input.focus();
    }
  });

  document.body.addEventListener("htmx:afterSwap", (e) => {
    // an htmx reset re-renders the whole history, which then holds what was shown live
    if (e.target.id === "history" && e.detail.requestConfig && e.detail.requestConfig.verb === "post") { C.reset(); C.scrollDown(true); }
    if (e.target.id !== "steps-list") return;
    // step chips the server rendered before a step's number was known get it from the steps list
    const index = {};
    e.target.querySelectorAll(".step-chip[data-step]").forEach((c) => { index[c.dataset.step] = c.dataset.index; });
    conv.querySelectorAll(".step-chip[data-step]").forEach((c) => {
      if (c.textContent === "step" && index[c.dataset.step]) c.textContent = "step " + index[c.dataset.step];
    });
  });

  setRunning(!!A.activeRunId);
  // sends this browser made that the server never confirmed, or refused: back, with Retry and Edit
  for (const s of sendsRead()) {
    if (C.at('.msg.user_message[data-otid="?"]', s.otid)) { forget(s.otid); continue; }
    const p = C.bubble(s.text, "failed", "");
    p.dataset.otid = s.otid;
    C.failBubble(p, s.error || "The page closed before the server confirmed this message: it was not delivered.");
  }
  try { const d = localStorage.getItem(DRAFT); if (d && !input.value) input.value = d; } catch (e) { /* ignore */ }
  C.scrollDown(true);
  connect();
})();
