// Agent workspace, the debugger: the pause card of a run a breakpoint holds before a model call. The server draws it
// (templates/core/_pause.html) after a reload and here: the page fetches it when a run pauses there and again when
// the pause may have ended (a Continue, Step or Stop from any tab or the API, an expiry). Continue / Step / Stop go
// over the page's socket (workspace.js). Also: the Breakpoints tab's count, and buttons that open an inspector tab.
window.AIDE_PAUSES = (function () {
  "use strict";
  const A = JSON.parse(document.getElementById("ide-config").textContent);
  const C = window.AIDE_CONV;
  const conv = document.getElementById("conversation");
  const OPEN = new Set(["waiting", "answering", "sending"]);
  const hooks = {send: null, changed: null};  // set by workspace.js

  function cards() { return Array.from(conv.querySelectorAll(".pause-card[data-run]")); }
  function byRun(runId) { return conv.querySelector(`.pause-card[data-run="${CSS.escape(runId)}"]`); }
  function waiting() { return cards().reverse().find((c) => c.dataset.state === "waiting" || c.dataset.state === "sending") || null; }
  function changed() { if (hooks.changed) hooks.changed(); }
  function showError(card, text) {
    const box = card.querySelector(".approval-error");
    if (!box) return;
    box.textContent = text || "";
    box.hidden = !text;
  }

  function fetchCard(runId) {
    return fetch(A.pauseUrl.replace("RUN", encodeURIComponent(runId)), {credentials: "same-origin"})
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        const box = document.createElement("div");
        box.innerHTML = html;  // server-rendered (autoescaped) template
        return box.querySelector(".pause-card");
      });
  }
  // the card as the server has it now; once let go, it keeps saying why it paused (the run no longer stores it).
  // Fetches can come back out of order: the answer to the latest one wins, and goes to the card now on the page.
  const asked = new Map(), shown = new Map();  // run id -> number of the latest fetch sent / applied
  function load(card) {
    const id = card.dataset.run;
    const n = (asked.get(id) || 0) + 1;
    asked.set(id, n);
    return fetchCard(id).then((fresh) => {
      if (n < (shown.get(id) || 0)) return;  // a later fetch already drew a newer state
      if (!card.isConnected) card = byRun(id) || card;
      if (!fresh || !card.isConnected) return;
      shown.set(id, n);
      // our answer is on its way, or nothing changed (the card is left as it is, focus and all)
      if (fresh.dataset.state === "waiting" && (card.dataset.state === "sending" || card.dataset.state === "waiting")) return;
      const asked = card.dataset.asked;
      if (fresh.dataset.state !== "waiting" && asked && !fresh.dataset.asked) {
        fresh.dataset.asked = asked;
        fresh.querySelector(".pause-head").after(C.el("div", "small muted pause-was", asked));
      }
      const err = card.querySelector(".approval-error");
      if (err && !err.hidden) showError(fresh, err.textContent);  // a refused Continue stays told
      card.replaceWith(fresh);
      changed();
    }).catch(() => {});
  }
  function refresh() { cards().filter((c) => OPEN.has(c.dataset.state)).forEach(load); }

  // a run_status says a run paused before a model call: its card, placed before the run's closing lines
  function arrived(ev) {
    const known = byRun(ev.run_id);
    if (known) { load(known); return; }
    fetchCard(ev.run_id).then((node) => {
      if (!node || byRun(ev.run_id)) return;
      C.dropEmpty();
      const anchor = C.trailingStatus();
      if (anchor) anchor.before(node); else C.place(node);
      C.scrollDown(true);
      changed();
    }).catch(() => {
      const note = C.note("Run " + C.short(ev.run_id) + " paused before a model call; reload the page to continue it.");
      C.place(note);
    });
  }

  function submit(card, how) {
    if (!hooks.send) return;
    showError(card, "");
    card.dataset.state = "sending";
    card.querySelectorAll("[data-pause]").forEach((b) => { b.disabled = true; });
    const lead = card.querySelector(".pause-lead");
    if (lead) lead.textContent = how === "stop" ? "Stopping…" : (how === "step" ? "Stepping…" : "Continuing…");
    hooks.send(card, {type: "continue", run_id: card.dataset.run, step: how === "step", stop: how === "stop"}, how === "stop");
    changed();
  }
  conv.addEventListener("click", (e) => {
    const btn = e.target.closest(".pause-card[data-state=waiting] [data-pause]");
    if (btn) submit(btn.closest(".pause-card"), btn.dataset.pause);
  });

  // ---- what the socket said about a Continue / Step / Stop this tab sent, told on the card now on the page (a fetch
  // may have drawn it anew since the answer left)
  function current(card) { return card.isConnected ? card : byRun(card.dataset.run) || card; }
  function accepted(card, runId) {
    card = current(card);
    if (!card.isConnected) return;
    if (!OPEN.has(card.dataset.state)) { changed(); return; }  // drawn already with what happened
    card.dataset.state = "answering";
    changed();
    load(card);
  }
  function refused(card, ev) {
    card = current(card);
    if (!card.isConnected) return;
    const detail = ev.detail && typeof ev.detail === "object" ? ev.detail : {};
    showError(card, String(ev.message || "Refused."));
    if (detail.code === "ALREADY_ANSWERED") { card.dataset.state = "answering"; load(card); return; }
    card.dataset.state = "waiting";  // nothing was taken: the person may try again (the card as it stands)
    card.querySelectorAll("[data-pause]").forEach((b) => { b.disabled = false; });
    changed();
    load(card);
  }
  function reveal() {
    const card = waiting();
    if (!card) return;
    card.scrollIntoView({block: "center", behavior: "smooth"});
    const first = card.querySelector("[data-pause]");
    if (first) first.focus({preventScroll: true});
  }

  // ---- the Breakpoints tab says how many breakpoints the agent has
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.target.id !== "breakpoints-panel") return;
    const count = document.getElementById("bp-count");
    const n = e.target.querySelectorAll(".bp-item").length;
    if (count) { count.textContent = String(n); count.hidden = n === 0; }
  });

  // ---- a block edited while paused: the Context tab compiles the held call again, and the card says its new size
  function heldTokens(root) {
    const held = root.querySelector("#held-note[data-run]");
    const card = held ? byRun(held.dataset.run) : null;
    if (!card || card.dataset.state !== "waiting" || !held.dataset.tokens) return;
    const shown = card.querySelector(".pause-tokens");
    if (shown) shown.textContent = held.dataset.tokens + " tokens";
    const why = card.querySelector(".pause-why");
    if (why) card.dataset.asked = "Paused before the model call — " + why.textContent + " · " + held.dataset.tokens + " tokens";
  }
  document.body.addEventListener("htmx:afterSwap", (e) => { if (e.target.id === "context-panel") heldTokens(e.target); });
  heldTokens(document);  // after a reload: the card reads the count it paused with, the Context tab the one now

  return {refresh, arrived, waiting, accepted, refused, reveal, hooks};
})();
