// Agent workspace, the Tests tab: the editor's small behaviours (form or raw JSON, more rows), "Save as test"
// opening the tab, and test runs refreshed from the server as the websocket reports each finished test.
(function () {
  "use strict";
  const $ = (sel, root) => (root || document).querySelector(sel);
  const tab = () => $('.pill-nav [data-tab="tab-tests"]');

  function openTests() { const t = tab(); if (t && t.getAttribute("aria-selected") !== "true") t.click(); }

  // A run's box as the server has it now, fetched after each of its events. Fetches can come back out of order (a
  // test's result and the run's end arrive together): the answer to the latest one wins, and replaces the box now on
  // the page. (htmx.ajax would share one request slot with every other refresh of the page and drop all but the last
  // one queued, which could leave a finished run showing "running".)
  const asked = new Map(), shown = new Map();  // run id -> number of the latest fetch sent / applied
  const boxOf = (runId) => document.querySelector(`[data-test-run="${CSS.escape(runId)}"]`);
  function refreshRun(runId) {
    const list = $("#test-results");
    const box = boxOf(runId);
    if (!box && !list) return;
    const url = box ? box.dataset.url : list.dataset.resultsUrl.replace("RUN", encodeURIComponent(runId));
    const n = (asked.get(runId) || 0) + 1;
    asked.set(runId, n);
    fetch(url, {credentials: "same-origin", headers: {"HX-Request": "true"}})
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        if (n < (shown.get(runId) || 0)) return;  // a later fetch already drew a newer state
        const holder = document.createElement("div");
        holder.innerHTML = html;  // server-rendered (autoescaped) template
        const fresh = holder.querySelector("[data-test-run]");
        if (!fresh) return;
        shown.set(runId, n);
        const current = boxOf(runId);
        if (current && current.outerHTML === fresh.outerHTML) return;  // nothing changed: the box stays as it is
        if (current) current.replaceWith(fresh);
        else {  // a run started elsewhere (another tab, the API): shown too, newest first
          const target = $("#test-results");
          if (!target) return;
          target.prepend(fresh);
          const none = $("#no-results"); if (none) none.remove();
        }
        htmx.process(fresh);
      })
      .catch(() => {});
  }
  function dedupe(list) {  // a run's box can arrive twice (its start and its first event race): keep the newest
    const seen = new Set();
    list.querySelectorAll("[data-test-run]").forEach((b) => {
      if (seen.has(b.dataset.testRun)) b.remove(); else seen.add(b.dataset.testRun);
    });
  }
  // workspace.js forwards the agent's test events here (agent_test_result after each test, agent_test_run at the end)
  document.body.addEventListener("aide:agent-test", (e) => refreshRun(e.detail.test_run_id));
  // events sent while the socket was down are lost: a reconnect re-reads the runs still going
  new MutationObserver(() => {
    if (document.body.dataset.ws !== "open") return;
    document.querySelectorAll('[data-test-run][data-status="created"], [data-test-run][data-status="running"]')
      .forEach((b) => refreshRun(b.dataset.testRun));
  }).observe(document.body, {attributes: true, attributeFilter: ["data-ws"]});

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
    if (t.id === "test-results") {
      dedupe(t);
      const none = $("#no-results"); if (none) none.remove();
    }
  });

  document.addEventListener("change", (e) => {
    if (e.target.name !== "editor" || !e.target.closest("#test-form")) return;
    const form = e.target.closest("#test-form");
    form.querySelectorAll("[data-editor]").forEach((d) => { d.hidden = d.dataset.editor !== e.target.value; });
  });

  document.addEventListener("click", (e) => {
    const add = e.target.closest("[data-add-row]");
    if (add) {
      const rows = add.parentElement.querySelectorAll(add.dataset.addRow);
      const copy = rows[rows.length - 1].cloneNode(true);
      copy.querySelectorAll("input").forEach((i) => { i.value = ""; });
      rows[rows.length - 1].after(copy);
      return;
    }
    const turn = e.target.closest("[data-add-turn]");
    if (turn) {
      const areas = turn.parentElement.querySelectorAll("textarea[name=turn]");
      const copy = areas[areas.length - 1].cloneNode(false);
      copy.value = "";
      copy.setAttribute("aria-label", "Turn " + (areas.length + 1));
      areas[areas.length - 1].after(copy);
      copy.focus();
      return;
    }
    if (e.target.closest("[data-close-editor]")) { $("#test-editor").textContent = ""; return; }
    const dismiss = e.target.closest("[data-dismiss-run]");
    if (dismiss) dismiss.closest(".test-run").remove();
  });
})();
