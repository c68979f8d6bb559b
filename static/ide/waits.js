// Agent workspace, waits: the card of a run that waits for someone (the one module for them). Its reply's tool calls
// wait for an approval, a client's result or a tool-call breakpoint (templates/core/_wait_calls.html: each call
// approved, with its arguments edited or not, or denied with a reason; at a breakpoint also Step and Stop), or a
// breakpoint holds it before its model call (templates/core/_wait_model_call.html: Continue, Step, Stop). The server
// draws both, in the history and live. A card that waits or whose answer runs reads itself again (its hx-get) on the
// body's "waits-changed" (any wait may have ended: an answer from any tab or the API, a cancel, an expiry, the socket
// back) and "pauses-changed" (a run went on: a pause may have been let go); one read at a time, the latest queued; a
// card still waiting is answered 204 and keeps what is being typed in it (core.web.waits). A card is its own form:
// htmx posts the answer (replacing a read in flight) and swaps in the card the server answers with (a refusal is a
// 422 with the card saying why); the run it starts shows as any run. A Context tab that compiles the held call
// again tells the pause card its size (an out-of-band swap).
window.AIDE_WAITS = (function () {
  "use strict";
  const C = window.AIDE_CONV;
  const conv = document.getElementById("conversation");
  const WAITS = new Set(["waiting", "loading"]);  // a card just arrived (loading) is a wait
  const hooks = {started: null, changed: null};  // set by workspace.js

  function waiting() { return Array.from(conv.querySelectorAll(".wait-card")).reverse().find((c) => WAITS.has(c.dataset.state)) || null; }
  function changed() { if (hooks.changed) hooks.changed(waiting()); }
  const refresh = (pauses) => C.bump(pauses ? "pauses-changed" : "waits-changed");
  const live = (node) => { htmx.process(node); changed(); };  // listening before the next event's refresh

  // ---- live: the server draws a reply's request (its streamed calls' text first, then the card) and the answer
  C.hooks.placed = (ev, node, known) => {  // known: the card was on the page already (the history held it)
    if (ev.message_type === "approval_response_message") refresh();  // every card it answers shows what was decided
    else if (ev.message_type === "approval_request_message") { if (known) htmx.trigger(node, "wait-check"); else live(node); }
  };
  // a run_status says a run paused before a model call, with its card (core.web.live): placed before the run's
  // closing lines (a card already shown reads itself on the same status's "pauses-changed")
  function arrived(ev) {
    const [node] = C.nodes(ev.html);
    if (node && !C.at('.wait-model-call[data-run="?"]', ev.run_id)) { C.before(node, C.trailingStatus()); live(node); }
  }

  // ---- several waiting calls: choose per call (Approve, Deny), then Send answers posts them together
  function progress(card) {
    const calls = Array.from(card.querySelectorAll(".approval-call"));
    const chosen = calls.filter((c) => c.querySelector("input[name^='choice:']").value).length;
    card.querySelector("[data-send-answers]").disabled = chosen < calls.length;
    card.querySelector(".approval-progress").textContent = chosen < calls.length
      ? `${chosen} of ${calls.length} calls answered: choose Approve or Deny for each, then send the answers together.`
      : `All ${calls.length} calls answered: send the answers.`;
  }
  conv.addEventListener("click", (e) => {
    const btn = e.target.closest(".wait-card[data-state=waiting] button[data-answer][type=button]");
    if (!btn) return;
    const call = btn.closest(".approval-call");
    call.querySelector("input[name^='choice:']").value = btn.dataset.answer;
    call.querySelectorAll("[data-answer]").forEach((b) => b.setAttribute("aria-pressed", String(b === btn)));
    call.querySelector(".approval-choice").textContent = btn.dataset.answer === "approve" ? "✓ will approve" : "✗ will deny";
    progress(btn.closest(".wait-card"));
  });
  conv.addEventListener("input", (e) => {  // a new edit clears the old complaint
    const area = e.target.closest(".wait-card .approval-args");
    if (!area) return;
    const out = area.closest(".approval-call").querySelector(".approval-args-error");
    if (out && !out.hidden) { out.hidden = true; area.removeAttribute("aria-invalid"); }
  });

  // ---- a card swapped in: the answer's (the run it started goes on as any run, workspace.js) or read again
  document.body.addEventListener("htmx:afterSwap", (e) => {
    const card = e.target;
    if (!card.matches(".wait-card")) return;
    if (card.querySelector("[data-send-answers]")) progress(card);
    if (e.detail.requestConfig.verb === "post" && card.dataset.state === "answering" && hooks.started) hooks.started(card.dataset.answerRun);
    changed();
  });
  function reveal() {
    const card = waiting();
    if (!card) return;
    card.scrollIntoView({block: "center", behavior: "smooth"});
    const first = card.querySelector("button[data-answer], .approval-args, [data-pause]");
    if (first) first.focus({preventScroll: true});
  }

  return {refresh, arrived, waiting, reveal, hooks};
})();
