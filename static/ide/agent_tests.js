// Agent workspace, the Tests tab: the editor's close button (its "+ turn" rows come from the server, its form or raw
// JSON switch is ide.css), "Save as test" opening the tab, and test runs refreshed from the server as the websocket
// reports each finished test.
(function () {
  "use strict";
  const $ = (sel, root) => (root || document).querySelector(sel);
  const tab = () => $('.pill-nav [data-tab="tab-tests"]');

  function openTests() { const t = tab(); if (t && t.getAttribute("aria-selected") !== "true") t.click(); }

  // The websocket's test events (workspace.js forwards agent_test_result after each test, agent_test_run at the end):
  // a run's box reads itself again (its hx-get; a newer event replaces a read in flight, so the last answer is the
  // newest state; it also reads itself when the socket comes back, for the events sent while it was away). A run
  // started elsewhere (another tab, the API) is read into the list, newest first. What the socket told of each run
  // is kept: a box that comes in behind it (the answer to its start, or a read, swapped in after the word came and
  // before htmx bound its trigger) reads itself again once bound.
  const told = {};  // run id -> {ended, done: the ids of its finished tests}
  document.body.addEventListener("aide:agent-test", (e) => {
    const id = e.detail.test_run_id, box = document.getElementById("test-run-" + id), list = $("#test-results");
    const t = (told[id] = told[id] || {done: new Set()});
    if (e.detail.result) t.done.add(e.detail.result.test_id); else t.ended = true;
    if (box) htmx.trigger(box, "test-event");
    const url = list && list.dataset.resultsUrl.replace("RUN", encodeURIComponent(id));
    if (!box && list) htmx.ajax("GET", url, {source: list, target: list, swap: "afterbegin"});  // its own request slot
  });

  // A refusal (HTTP 422: the form again, saying what is wrong) is swapped in as the answer it is, for the forms that
  // opt in with data-swap-refusals (the test editor, Add to dataset); htmx leaves other 4xx answers unswapped.
  document.body.addEventListener("htmx:beforeSwap", (e) => {
    const from = e.detail.requestConfig && e.detail.requestConfig.elt;  // the form that asked (the event's is the target)
    if (e.detail.xhr.status !== 422 || !from || !from.closest("[data-swap-refusals]")) return;
    e.detail.shouldSwap = true;
    e.detail.isError = false;
  });

  document.body.addEventListener("htmx:afterSwap", (e) => {
    const t = e.target;
    if (t.id === "test-editor" && t.firstElementChild) {
      openTests();
      if (t.querySelector("#test-saved")) return;
      t.scrollIntoView({block: "start"});
      const name = t.querySelector("#test-form input[name=name]"); if (name && !name.value) name.focus();
    }
    if (t.id === "test-results") {  // a run's box can arrive twice (its start and its first event race): the newest stays
      const seen = new Set();
      t.querySelectorAll("[data-test-run]").forEach((b) => { if (seen.has(b.id)) b.remove(); else seen.add(b.id); });
      const none = $("#no-results"); if (none) none.remove();
    }
  });

  document.body.addEventListener("htmx:load", (e) => {  // (htmx is deferred: not yet defined as this runs)
    const el = e.detail.elt, t = el.matches("[data-test-run][hx-get]") && told[el.dataset.testRun];
    if (t && (t.ended || el.querySelectorAll(".test-result:not(.pending)").length < t.done.size)) htmx.trigger(el, "test-event");
  });

  document.addEventListener("click", (e) => {
    if (e.target.closest("[data-close-editor]")) { $("#test-editor").textContent = ""; return; }
    const dismiss = e.target.closest("[data-dismiss-run]");
    if (dismiss) dismiss.closest(".test-run").remove();
  });
})();
