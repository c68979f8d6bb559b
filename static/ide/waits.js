// Agent workspace, waits: the card of a run that waits for someone (the one module for them). Its reply's tool calls
// wait for an approval, a client's result or a tool-call breakpoint (templates/core/_wait_calls.html: each call
// approved, with its arguments edited or not, or denied with a reason; at a breakpoint also Step and Stop), or a
// breakpoint holds it before its model call (templates/core/_wait_model_call.html: Continue, Step, Stop). The server
// draws both, in the history and live; the page fetches a card again when its wait may have ended (an answer from any
// tab or the API, a cancel, an expiry). Answers go over the page's socket (workspace.js).
window.AIDE_WAITS = (function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const C = window.AIDE_CONV;
  const conv = document.getElementById("conversation");
  const OPEN = new Set(["waiting", "answering", "sending", "loading"]);
  const WAITS = new Set(["waiting", "sending", "loading"]);  // a card just arrived (loading) is a wait
  const hooks = {send: null, changed: null};  // set by workspace.js

  // a card of waiting calls is known by its reply's id, one before a model call by its run's
  const key = (card) => card.dataset.id ? "m" + card.dataset.id : "r" + card.dataset.run;
  function url(card) {
    return card.dataset.id ? A.waitCallsUrl.replace("MSG", encodeURIComponent(card.dataset.id))
      : A.waitModelCallUrl.replace("RUN", encodeURIComponent(card.dataset.run));
  }
  const find = (k) => C.at(k[0] === "m" ? '.wait-card[data-id="?"]' : '.wait-model-call[data-run="?"]', k.slice(1));
  function cards() { return Array.from(conv.querySelectorAll(".wait-card")); }
  function waiting() { return cards().reverse().find((c) => WAITS.has(c.dataset.state)) || null; }
  function changed() { if (hooks.changed) hooks.changed(waiting()); }
  function showError(card, text) {
    const box = card.querySelector(".approval-error");
    if (!box) return;
    box.textContent = text || "";
    box.hidden = !text;
  }
  const fetchCard = (card) => C.load(url(card)).then((nodes) => nodes.find((n) => n.matches(".wait-card")));

  // ---- the card as the server has it now. Fetches can come back out of order (a refresh when a run ends, another
  // when this tab's answer is taken): the answer to the latest one wins, and goes to the card now on the page.
  const asked = new Map(), shown = new Map();  // card key -> number of the latest fetch sent / applied
  function load(card) {
    const k = key(card);
    const n = (asked.get(k) || 0) + 1;
    asked.set(k, n);
    return fetchCard(card).then((fresh) => {
      if (n < (shown.get(k) || 0)) return;  // a later fetch already drew a newer state
      if (!card.isConnected) card = find(k) || card;
      if (!fresh || !card.isConnected) return;
      shown.set(k, n);
      // a card still waiting keeps what the person is typing (or sending) in it, focus and all
      if (fresh.dataset.state === "waiting" && (card.dataset.state === "waiting" || card.dataset.state === "sending")) return;
      const said = card.dataset.asked;  // once let go, a pause keeps saying why it paused (the run no longer stores it)
      if (fresh.dataset.state !== "waiting" && said && !fresh.dataset.asked) {
        fresh.dataset.asked = fresh.querySelector(".pause-was").textContent = said;
      }
      const err = card.querySelector(".approval-error");
      if (err && !err.hidden) showError(fresh, err.textContent);  // a refused answer stays told
      card.replaceWith(fresh);
      changed();
    }).catch(() => {
      if (card.dataset.state === "loading") showError(card, "Could not load this approval request; reload the page to answer it.");
    });
  }
  function refresh(only) {  // only: a selector of the cards to fetch (default: every open one)
    cards().filter((c) => OPEN.has(c.dataset.state) && (!only || c.matches(only))).forEach(load);
  }

  // ---- live: the server draws a reply's request (its streamed calls' text first, then the card) and the answer
  C.hooks.placed = (ev, node, known) => {  // known: the card was on the page already (the history held it)
    if (ev.message_type === "approval_response_message") refresh();  // every card it answers shows what was decided
    else if (ev.message_type === "approval_request_message") { if (known) load(node); else changed(); }
  };
  // a run_status says a run paused before a model call: its card, placed before the run's closing lines
  function arrived(ev) {
    const known = find("r" + ev.run_id);
    if (known) { load(known); return; }
    fetchCard({dataset: {run: ev.run_id}}).then((node) => {
      if (!node || find("r" + ev.run_id)) return;
      C.before(node, C.trailingStatus());
      changed();
    }).catch(() => C.before(C.note("Run " + C.short(ev.run_id) + " paused before a model call; reload the page to continue it.")));
  }

  // ---- answering waiting calls: choose per call (one call: the choice is the answer), check the arguments, send
  function parseArgs(call) {
    const area = call.querySelector(".approval-args");
    const out = call.querySelector(".approval-args-error");
    let value, wrong = "";
    try { value = JSON.parse(area.value); } catch (e) { wrong = "The arguments are not valid JSON: " + e.message; }
    if (!wrong && (!value || typeof value !== "object" || Array.isArray(value))) wrong = "The arguments must be a JSON object, such as {\"name\": \"value\"}.";
    out.textContent = wrong; out.hidden = !wrong;
    if (wrong) { area.setAttribute("aria-invalid", "true"); area.focus(); return undefined; }
    area.removeAttribute("aria-invalid");
    return value;
  }
  function edited(call, value) {
    const area = call.querySelector(".approval-args");
    try { return JSON.stringify(value) !== JSON.stringify(JSON.parse(area.defaultValue)); } catch (e) { return true; }
  }
  function choose(call, choice) {
    call.dataset.choice = choice;
    call.querySelectorAll("[data-answer]").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.answer === choice)));
    const note = call.querySelector(".approval-choice");
    if (note) note.textContent = choice === "approve" ? "✓ will approve" : "✗ will deny";
  }
  function progress(card) {
    const calls = Array.from(card.querySelectorAll(".approval-call"));
    const chosen = calls.filter((c) => c.dataset.choice).length;
    const btn = card.querySelector("[data-send-answers]");
    const note = card.querySelector(".approval-progress");
    if (btn) btn.disabled = chosen < calls.length;
    if (note) note.textContent = chosen < calls.length
      ? `${chosen} of ${calls.length} calls answered: choose Approve or Deny for each, then send the answers together.`
      : `All ${calls.length} calls answered: send the answers.`;
  }
  function collect(card, fallback) {  // fallback: the choice of a call not chosen yet (Step approves it)
    const out = [];
    for (const call of card.querySelectorAll(".approval-call")) {
      const reason = (call.querySelector(".approval-reason") || {value: ""}).value.trim() || null;
      const choice = call.dataset.choice || fallback;
      const answer = {type: "approval", tool_call_id: call.dataset.callId, approve: choice === "approve", reason: reason};
      if (answer.approve) {
        const value = parseArgs(call);
        if (value === undefined) return null;
        if (edited(call, value)) answer.arguments = value;
      }
      out.push(answer);
    }
    return out;
  }

  // ---- sending: an answer to waiting calls; at a breakpoint Continue, Step (the calls as edited — a call chosen Deny
  // is skipped — then stop again before the next model call or tool call) or Stop (the wait ends, its calls denied)
  const FIELDS = "button[data-answer], button[data-send-answers], button[data-bp], button[data-pause], .approval-args, .approval-reason";
  const SENDING = {stop: "Stopping…", step: "Stepping…", continue: "Continuing…"};
  function go(card, how, text, msg) {
    if (!hooks.send || !msg) return;
    showError(card, "");
    card.dataset.state = "sending";
    card.querySelectorAll(FIELDS).forEach((b) => { b.disabled = true; });
    const lead = card.querySelector(".approval-lead");
    if (lead) lead.textContent = text;
    hooks.send(card, msg, how === "stop");
    changed();
  }
  function submit(card) {
    const answers = collect(card);
    if (answers) go(card, "answer", "Sending your answer…", {type: "approval", approvals: answers, message_id: card.dataset.id});
  }
  function goOn(card, how) {
    const msg = {type: "wait_answer", run_id: card.dataset.run, step: how === "step", stop: how === "stop"};
    if (card.dataset.id && how === "step") {  // a tool-call breakpoint: its calls as the person left them
      const answers = collect(card, "approve");
      if (!answers) return;
      msg.approvals = answers;
      go(card, how, "Stepping: running the call, then stopping before the next one…", msg);
      return;
    }
    go(card, how, SENDING[how], msg);
  }
  conv.addEventListener("click", (e) => {
    const card = e.target.closest(".wait-card[data-state=waiting]");
    if (!card) return;
    const btn = e.target.closest("[data-answer]");
    if (btn) {
      const call = btn.closest(".approval-call");
      if (btn.dataset.answer === "approve" && parseArgs(call) === undefined) return;
      choose(call, btn.dataset.answer);
      if (card.querySelectorAll(".approval-call").length === 1) submit(card); else progress(card);
      return;
    }
    if (e.target.closest("[data-send-answers]")) { submit(card); return; }
    const how = e.target.closest("[data-bp], [data-pause]");
    if (how) goOn(card, how.dataset.bp || how.dataset.pause);
  });
  conv.addEventListener("input", (e) => {  // a new edit clears the old complaint
    const area = e.target.closest(".wait-card .approval-args");
    if (!area) return;
    const out = area.closest(".approval-call").querySelector(".approval-args-error");
    if (out && !out.hidden) { out.hidden = true; area.removeAttribute("aria-invalid"); }
  });

  // ---- what the socket said about an answer this tab sent, told on the card now on the page (a fetch may have
  // drawn it anew since the answer left: its refusal must still be told)
  function current(card) { return card.isConnected ? card : find(key(card)) || card; }
  function accepted(card, runId) {
    card = current(card);
    if (!card.isConnected) return;
    if (!OPEN.has(card.dataset.state)) { changed(); return; }  // drawn already with what was decided
    card.dataset.state = "answering";
    const lead = card.dataset.id && card.querySelector(".approval-lead");
    if (lead) lead.textContent = "Answer sent; running it (run " + C.short(runId) + ")…";
    changed();
    load(card);
  }
  function refused(card, ev) {
    card = current(card);
    if (!card.isConnected) return;
    const detail = ev.detail && typeof ev.detail === "object" ? ev.detail : {};
    showError(card, String(ev.message || "The answer was refused."));
    if (detail.code === "ALREADY_ANSWERED") { card.dataset.state = "answering"; load(card); return; }
    card.dataset.state = "waiting";  // nothing was taken: the person may change the answer and send it again
    card.querySelectorAll(FIELDS).forEach((b) => { b.disabled = false; });
    changed();
    if (!card.dataset.id) { load(card); return; }  // a pause: the card as it stands
    if (card.querySelector("[data-send-answers]")) progress(card);
    const lead = card.querySelector(".approval-lead");
    if (lead) lead.textContent = "Not sent. Change the answer if needed and try again.";
  }
  function reveal() {
    const card = waiting();
    if (!card) return;
    card.scrollIntoView({block: "center", behavior: "smooth"});
    const first = card.querySelector("button[data-answer], .approval-args, [data-pause]");
    if (first) first.focus({preventScroll: true});
  }

  // ---- a block edited while paused: the Context tab compiles the held call again, and the card says its new size
  function heldTokens(root) {
    const held = root.querySelector("#held-note[data-run]");
    const card = held ? find("r" + held.dataset.run) : null;
    if (!card || card.dataset.state !== "waiting" || !held.dataset.tokens) return;
    const tokens = card.querySelector(".pause-tokens");
    if (tokens) tokens.textContent = held.dataset.tokens + " tokens";
    const why = card.querySelector(".pause-why");
    if (why) card.dataset.asked = "Paused before the model call — " + why.textContent + " · " + held.dataset.tokens + " tokens";
  }
  document.body.addEventListener("htmx:afterSwap", (e) => { if (e.target.id === "context-panel") heldTokens(e.target); });
  heldTokens(document);  // after a reload: the card reads the count it paused with, the Context tab the one now

  return {refresh, arrived, waiting, accepted, refused, reveal, hooks};
})();
