// Agent workspace: the websocket stream, the composer, the window slider and small conveniences.
// Everything a model or tool produced is inserted with textContent, never as HTML.
(function () {
  "use strict";
  const A = window.AIDE;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const live = $("#live");
  const conv = $("#conversation");
  const input = $("#composer-input");
  const statusEl = $("#run-status");
  const cancelBtn = $("#cancel-run");
  const shownCalls = new Set();
  const seen = new Set();
  let ws = null, retry = 0, running = false, cancelling = false, queue = [];
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
  function pretty(args) {
    // `thinking` is already shown as the reasoning above the call
    try {
      const v = JSON.parse(args);
      if (v && typeof v === "object" && !Array.isArray(v)) delete v.thinking;
      return JSON.stringify(v, null, 2);
    } catch (e) { return String(args); }
  }
  function nearBottom() { return conv.scrollHeight - conv.scrollTop - conv.clientHeight < 120; }
  function scrollDown(force) { if (force || nearBottom()) conv.scrollTop = conv.scrollHeight; }

  function shell(ev, label) {
    const box = el("div", "msg " + ev.message_type);
    box.dataset.type = ev.message_type;
    if (ev.id) box.dataset.id = ev.id;
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
    if (ev.step_id) {
      const chip = el("button", "step-chip", "step");
      chip.type = "button"; chip.dataset.step = ev.step_id; chip.title = "Show the payload sent at this step";
      meta.appendChild(chip);
    }
    meta.appendChild(el("span", "", time(ev.date)));
    box.appendChild(meta);
    return box;
  }

  const renderers = {
    user_message(ev) {
      if (ev.kind === "heartbeat") {
        const h = el("div", "msg heartbeat", "heartbeat — the agent asked to continue");
        h.dataset.type = "heartbeat"; h.title = ev.content || ""; return h;
      }
      const pending = live.querySelector(".msg.user_message.pending");
      if (pending && pending.querySelector(".body").textContent === ev.content) pending.remove();
      const b = shell(ev, "you"); b.appendChild(el("div", "body", ev.content)); return b;
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
      row.appendChild(el("code", "", tc.name));
      row.appendChild(el("span", "spacer"));
      if (ev.id) {
        const a = el("a", "small open-workbench", "Open in workbench");
        a.href = A.toolsUrl + "?message=" + encodeURIComponent(ev.id) + "&call=" + encodeURIComponent(tc.tool_call_id || "");
        row.appendChild(a);
      }
      b.appendChild(row);
      b.appendChild(el("pre", "", pretty(tc.arguments)));
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
      b.appendChild(el("div", "body", ev.message + (ev.detail ? "\n" + ev.detail : "")));
      return b;
    },
    stop_reason(ev) { return el("div", "msg stop_reason", "stop reason: " + ev.stop_reason); },
    usage_statistics(ev) {
      return el("div", "msg usage_statistics",
        `usage: ${ev.prompt_tokens} prompt + ${ev.completion_tokens} completion = ${ev.total_tokens} tokens · ${ev.step_count} step${ev.step_count === 1 ? "" : "s"}`);
    },
  };

  function showCancelling() {
    statusEl.textContent = "";
    statusEl.appendChild(el("span", "spinner"));
    statusEl.appendChild(el("span", "", " cancelling…"));
    statusEl.title = "The run stops at the end of its current step.";
    statusEl.dataset.state = "cancelling";
    cancelBtn.disabled = true;
  }

  function setRunning(on, label) {
    running = on;
    if (!on) cancelling = false;
    if (on && cancelling) { cancelBtn.hidden = false; showCancelling(); return; }  // a late "running" event
    statusEl.textContent = "";
    statusEl.title = "";
    if (on) { statusEl.appendChild(el("span", "spinner")); statusEl.appendChild(el("span", "", " running…")); }
    else statusEl.appendChild(el("span", "muted", label || "idle"));
    statusEl.dataset.state = on ? "running" : (label || "idle");
    cancelBtn.hidden = !on;
    cancelBtn.disabled = false;
  }

  function refreshContext() { htmx.trigger(document.body, "context-changed"); }

  function handle(ev) {
    const t = ev.message_type;
    if (t === "pong") return;
    if (t === "cancel_requested") { if (running) showCancelling(); return; }
    if (t === "run_status") {
      const active = ev.status === "running" || ev.status === "created";
      const why = ev.stop_reason && ev.stop_reason !== ev.status ? " · " + ev.stop_reason : "";
      setRunning(active, active ? "" : ev.status + why);
      if (!active) refreshContext();
      return;
    }
    if (t === "block_update") { onBlockUpdate(ev.block); refreshContext(); return; }
    if (t === "context_update") { refreshContext(); return; }
    const key = ev.id ? t + ":" + ev.id + ":" + (t === "tool_call_message" ? (ev.tool_call || {}).tool_call_id : "") : null;
    if (key && seen.has(key)) return;
    if (key) seen.add(key);
    const r = renderers[t];
    if (!r) return;
    const node = r(ev);
    if (!node) return;
    const empty = $("#empty-history"); if (empty) empty.remove();
    live.appendChild(node);
    if (t === "stop_reason") refreshContext();
    scrollDown(true);
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    ws = new WebSocket(proto + location.host + "/ws/agents/" + encodeURIComponent(A.agentId) + "/");
    ws.onopen = () => { retry = 0; document.body.dataset.ws = "open"; while (queue.length) ws.send(queue.shift()); };
    ws.onmessage = (m) => { let ev; try { ev = JSON.parse(m.data); } catch (e) { return; } handle(ev); };
    ws.onclose = () => {
      document.body.dataset.ws = "closed";
      setTimeout(connect, Math.min(10000, 500 * 2 ** retry++));
    };
  }
  function send(obj) {
    const data = JSON.stringify(obj);
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(data); else queue.push(data);
  }

  // composer: Enter sends, Shift+Enter is a new line
  $("#composer").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    const p = shell({message_type: "user_message"}, "you");
    p.classList.add("pending");
    p.appendChild(el("div", "body", text));
    live.appendChild(p);
    const empty = $("#empty-history"); if (empty) empty.remove();
    scrollDown(true);
    send({type: "user_message", text: text});
    input.value = "";
    setRunning(true);
  }
  cancelBtn.addEventListener("click", () => { cancelling = true; showCancelling(); send({type: "cancel"}); });

  // tabs
  document.querySelectorAll(".pill-nav [data-tab]").forEach((btn) => btn.addEventListener("click", () => {
    document.querySelectorAll(".pill-nav [data-tab]").forEach((b) => {
      b.setAttribute("aria-selected", b === btn ? "true" : "false");
      document.getElementById(b.dataset.tab).hidden = b !== btn;
    });
    if (btn.dataset.tab === "tab-archival") htmx.trigger("#tab-archival", "intersect");
  }));

  // context window slider: re-scale the breakdown from the section token counts while dragging (no write)
  function applyWindow() {
    const slider = $("#window-slider"), ctx = $("#ctx");
    if (!slider || !ctx) return;
    const limit = parseInt(slider.value, 10), total = parseInt(ctx.dataset.total, 10);
    $("#window-value").textContent = limit;
    $("#ctx-limit").textContent = limit;
    $("#ctx-pct").textContent = (100 * total / limit).toFixed(1);
    $("#ctx-free").textContent = limit - total;
    ctx.querySelectorAll("#ctx-bar span[data-tokens]").forEach((s) => { s.style.width = (100 * s.dataset.tokens / limit) + "%"; });
    ctx.querySelectorAll("#ctx-table td.pct").forEach((td) => { td.textContent = (100 * td.dataset.tokens / limit).toFixed(2) + "%"; });
    $("#ctx-bar").classList.toggle("over", total > limit);
    $("#ctx-over-live").hidden = !(total > limit);
    const saved = parseInt(ctx.dataset.limit, 10);
    const note = $("#unsaved-note"); if (note) note.hidden = limit === saved;
  }
  document.addEventListener("input", (e) => { if (e.target.id === "window-slider") applyWindow(); });
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.target.id === "context-panel" || e.target.id === "settings-form") applyWindow();
    if (e.target.id === "blocks-panel" || (e.target.closest && e.target.closest("#blocks-panel"))) initCounters();
  });

  // copy buttons, step chips, attach
  document.addEventListener("click", (e) => {
    const copy = e.target.closest("[data-copy]");
    if (copy) {
      const src = document.querySelector(copy.dataset.copy);
      const text = src ? src.textContent : "";
      const done = () => { copy.textContent = "Copied"; setTimeout(() => { copy.textContent = "Copy"; }, 1200); };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, done);
      else { const ta = el("textarea"); ta.value = text; document.body.appendChild(ta); ta.select(); document.execCommand("copy"); ta.remove(); done(); }
      return;
    }
    const chip = e.target.closest(".step-chip[data-step]");
    if (chip) {
      $(".pill-nav [data-tab=tab-context]").click();
      htmx.ajax("GET", A.stepUrl.replace("STEP", encodeURIComponent(chip.dataset.step)), {target: "#step-detail"})
        .then(() => { const d = $("#step-detail"); if (d) d.scrollIntoView({block: "start"}); });
      return;
    }
    if (e.target.id === "attach-btn") htmx.ajax("POST", $("#attach-select").value, {target: "#tools-attached"});
  });

  // memory blocks: live chars / limit counter
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
  function onBlockUpdate(b) {
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
  }

  initCounters();
  applyWindow();
  setRunning(!!A.activeRunId);
  scrollDown(true);
  connect();
})();
