// Agent workspace, waits: the card of a run that waits for someone (the one module for them). Its reply's tool calls
// wait for an approval, a client's result or a tool-call breakpoint (templates/core/_wait_calls.html: each call
// approved, with its arguments edited or not, or denied with a reason; at a breakpoint also Step and Stop), or a
// breakpoint holds it before its model call (templates/core/_wait_model_call.html: Continue, Step, Stop). The server
// draws both, in the history and live; the page fetches a card again when its wait may have ended (an answer from any
// tab or the API, a cancel, an expiry). A card is its own form: htmx posts the answer and swaps in the card the server
// answers with (core.web.waits; a refusal is a 422 with the card saying why); the run it starts shows as any run.
window.AIDE_WAITS = (function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const C = window.AIDE_CONV;
  const conv = document.getElementById("conversation");
  const OPEN = new Set(["waiting", "answering", "loading"]);
  const WAITS = new Set(["waiting", "loading"]);  // a card just arrived (loading) is a wait
  const hooks = {started: null, changed: null};  // set by workspace.js

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

  // ---- the card as the server has it now. Fetches can come back out of order (a refresh when a run ends, another
  // when this tab's answer is taken): the answer to the latest one wins, and goes to the card now on the page.
  const asked = new Map(), shown = new Map();  // card key -> number of the latest fetch sent / applied
  function load(card) {
    const k = key(card);
    const n = (asked.get(k) || 0) + 1;
    asked.set(k, n);
    return C.load(url(card)).then((nodes) => {
      const fresh = nodes.find((n) => n.matches(".wait-card"));
      if (n < (shown.get(k) || 0)) return;  // a later fetch already drew a newer state
      if (!card.isConnected) card = find(k) || card;
      if (!fresh || !card.isConnected || card.querySelector(".htmx-request")) return;  // its answer brings it
      shown.set(k, n);
      // a card still waiting keeps what the person is typing in it, focus and all
      if (fresh.dataset.state === "waiting" && card.dataset.state === "waiting") return;
      const said = card.dataset.asked || (card.querySelector("input[name=asked]") || {}).value;  // once let go, a
      if (fresh.dataset.state !== "waiting" && said && !fresh.dataset.asked) {  // pause keeps saying why it paused
        fresh.dataset.asked = fresh.querySelector(".pause-was").textContent = said;
      }
      const err = card.querySelector(".approval-error");
      if (err && !err.hidden) showError(fresh, err.textContent);  // a refused answer stays told
      card.replaceWith(fresh);
      if (window.htmx) htmx.process(fresh);  // its form
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
  // a run_status says a run paused before a model call, with its card (core.web.live): placed before the run's
  // closing lines
  function arrived(ev) {
    const known = find("r" + ev.run_id), [node] = C.nodes(ev.html);
    if (known) load(known);
    else if (node) { C.before(node, C.trailingStatus()); changed(); }
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

  // ---- the card the server answered an answer with: the run it started goes on as any run (workspace.js)
  function answered(card) {
    const k = key(card), n = (asked.get(k) || 0) + 1;
    asked.set(k, n); shown.set(k, n);  // a fetch sent before the answer draws nothing older
    if (card.querySelector("[data-send-answers]")) progress(card);
    if (card.dataset.state === "answering" && hooks.started) hooks.started(card.dataset.answerRun);
    changed();
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
    const why = card.querySelector(".pause-why"), asked = card.querySelector("input[name=asked]");
    if (why && asked) asked.value = "Paused before the model call — " + why.textContent + " · " + held.dataset.tokens + " tokens";
  }
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.target.id === "context-panel") heldTokens(e.target);
    else if (e.target.matches(".wait-card")) answered(e.target);
  });
  heldTokens(document);  // after a reload: the card reads the count it paused with, the Context tab the one now

  return {refresh, arrived, waiting, reveal, hooks};
})();
