// Agent workspace, approvals: the card of a reply whose tool calls wait for a person. The server draws it
// (templates/core/_approval.html) in the history and over the socket; the page fetches it again when a
// wait may have ended (an answer from any tab or the API, a cancel, an expiry). Its answer — each waiting call
// approved (with its arguments, edited or not) or denied with a reason — goes over the page's socket (workspace.js).
window.AIDE_APPROVALS = (function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const C = window.AIDE_CONV;
  const conv = document.getElementById("conversation");
  const OPEN = new Set(["waiting", "answering", "sending", "loading"]);
  const hooks = {send: null, changed: null, cont: null};  // set by workspace.js

  function cards() { return Array.from(conv.querySelectorAll(".approval-card[data-id]")); }
  const WAITS = new Set(["waiting", "sending", "loading"]);  // a card just arrived (loading) is a request that waits
  function waiting() { return cards().reverse().find((c) => WAITS.has(c.dataset.state)) || null; }
  function changed() { if (hooks.changed) hooks.changed(waiting()); }
  function showError(card, text) {
    const box = card.querySelector(".approval-error");
    if (!box) return;
    box.textContent = text || "";
    box.hidden = !text;
  }

  // ---- the card as the server has it now. Fetches can come back out of order (a refresh when a run ends, another
  // when this tab's answer is taken): the answer to the latest one wins, and goes to the card now on the page.
  const asked = new Map(), shown = new Map();  // card id -> number of the latest fetch sent / applied
  function load(card) {
    const id = card.dataset.id;
    const n = (asked.get(id) || 0) + 1;
    asked.set(id, n);
    return fetch(A.approvalUrl.replace("MSG", encodeURIComponent(id)), {credentials: "same-origin"})
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        const box = document.createElement("div");
        box.innerHTML = html;  // server-rendered (autoescaped) template
        const fresh = box.querySelector(".approval-card");
        if (n < (shown.get(id) || 0)) return;  // a later fetch already drew a newer state
        if (!card.isConnected && id) card = conv.querySelector(`.approval-card[data-id="${CSS.escape(id)}"]`) || card;
        if (!fresh || !card.isConnected) return;
        shown.set(id, n);
        // a card still waiting keeps what the person is typing (or sending) in it
        if (fresh.dataset.state === "waiting" && (card.dataset.state === "waiting" || card.dataset.state === "sending")) return;
        const err = card.querySelector(".approval-error");
        if (err && !err.hidden) showError(fresh, err.textContent);  // a refused answer stays told
        card.replaceWith(fresh);
        changed();
      })
      .catch(() => {
        if (card.dataset.state === "loading") showError(card, "Could not load this approval request; reload the page to answer it.");
      });
  }
  function refresh() { cards().filter((c) => OPEN.has(c.dataset.state)).forEach(load); }

  // ---- live: the server draws the request (its streamed calls' text first, then the card) and the answer
  C.hooks.placed = (ev, node, known) => {  // known: the card was on the page already (the history held it)
    if (ev.message_type === "approval_response_message") refresh();  // every card it answers shows what was decided
    else if (ev.message_type === "approval_request_message") { if (known) load(node); else changed(); }
  };

  // ---- answering: choose per call (one call: the choice is the answer), check the arguments, send together
  function parseArgs(call) {
    const area = call.querySelector(".approval-args");
    const out = call.querySelector(".approval-args-error");
    let value;
    try { value = JSON.parse(area.value); } catch (e) {
      out.textContent = "The arguments are not valid JSON: " + e.message; out.hidden = false; area.setAttribute("aria-invalid", "true"); area.focus();
      return undefined;
    }
    if (!value || typeof value !== "object" || Array.isArray(value)) {
      out.textContent = "The arguments must be a JSON object, such as {\"name\": \"value\"}."; out.hidden = false; area.setAttribute("aria-invalid", "true"); area.focus();
      return undefined;
    }
    out.hidden = true; area.removeAttribute("aria-invalid");
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
  const FIELDS = "button[data-answer], button[data-send-answers], button[data-bp], .approval-args, .approval-reason";
  function sending(card, text) {
    showError(card, "");
    card.dataset.state = "sending";
    card.querySelectorAll(FIELDS).forEach((b) => { b.disabled = true; });
    const lead = card.querySelector(".approval-lead");
    if (lead) lead.textContent = text;
  }
  function submit(card) {
    const answers = collect(card);
    if (!answers || !hooks.send) return;
    sending(card, "Sending your answer…");
    hooks.send(card, answers);
  }
  // a tool-call breakpoint's Step (the calls as edited — a call chosen Deny is skipped — then stop again before the
  // next model call or tool call) and Stop (end the wait: the calls are denied)
  function goOn(card, how) {
    if (!hooks.cont) return;
    if (how === "stop") {
      sending(card, "Stopping…");
      hooks.cont(card, {type: "continue", run_id: card.dataset.run, stop: true}, true);
      return;
    }
    const answers = collect(card, "approve");
    if (!answers) return;
    sending(card, "Stepping: running the call, then stopping before the next one…");
    hooks.cont(card, {type: "continue", run_id: card.dataset.run, approvals: answers, step: true}, false);
  }
  conv.addEventListener("click", (e) => {
    const card = e.target.closest(".approval-card[data-state=waiting]");
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
    const bp = e.target.closest("[data-bp]");
    if (bp) goOn(card, bp.dataset.bp);
  });
  conv.addEventListener("input", (e) => {  // a new edit clears the old complaint
    const area = e.target.closest(".approval-card .approval-args");
    if (!area) return;
    const out = area.closest(".approval-call").querySelector(".approval-args-error");
    if (out && !out.hidden) { out.hidden = true; area.removeAttribute("aria-invalid"); }
  });

  // ---- what the socket said about an answer this tab sent, told on the card now on the page (a fetch may have
  // drawn it anew since the answer left: its refusal must still be told)
  function current(card) {
    if (card.isConnected || !card.dataset.id) return card;
    return conv.querySelector(`.approval-card[data-id="${CSS.escape(card.dataset.id)}"]`) || card;
  }
  function accepted(card, runId) {
    card = current(card);
    if (!card.isConnected) return;
    if (!OPEN.has(card.dataset.state)) { changed(); return; }  // drawn already with what was decided
    card.dataset.state = "answering";
    const lead = card.querySelector(".approval-lead");
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
    card.querySelectorAll("button[data-answer], button[data-bp], .approval-args, .approval-reason").forEach((b) => { b.disabled = false; });
    const btn = card.querySelector("[data-send-answers]");
    if (btn) progress(card);
    const lead = card.querySelector(".approval-lead");
    if (lead) lead.textContent = "Not sent. Change the answer if needed and try again.";
    changed();
  }
  function reveal() {
    const card = waiting();
    if (!card) return;
    card.scrollIntoView({block: "center", behavior: "smooth"});
    const first = card.querySelector("button[data-answer], .approval-args");
    if (first) first.focus({preventScroll: true});
  }
  function names(card) {
    return card ? Array.from(card.querySelectorAll(".approval-call")).map((c) => c.dataset.name).filter(Boolean) : [];
  }

  return {refresh, waiting, accepted, refused, reveal, names, changed, hooks};
})();
