// Tools page: CodeMirror editor (Python highlighting) over the source textarea; the schema preview is an htmx
// request fired (debounced) on each edit; typed argument values survive the preview re-rendering the form.
(function () {
  "use strict";
  const ta = document.getElementById("source");
  let cm = null;
  if (window.CodeMirror && ta) {
    cm = CodeMirror.fromTextArea(ta, {mode: "python", lineNumbers: true, indentUnit: 4, matchBrackets: true,
                                      extraKeys: {Tab: (c) => c.replaceSelection("    ")}});
    cm.on("change", () => { cm.save(); htmx.trigger(ta, "cm-change"); });
    window.AIDE_EDITOR = cm;
  }
  let kept = {};
  document.body.addEventListener("htmx:configRequest", () => { if (cm) cm.save(); });
  document.body.addEventListener("htmx:beforeSwap", (e) => {
    if (e.detail.target.id !== "schema-panel") return;
    kept = {};
    document.querySelectorAll("#args-form [name^=arg_]").forEach((i) => { kept[i.name] = i.type === "checkbox" ? i.checked : i.value; });
  });
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.detail.target.id !== "schema-panel") return;
    document.querySelectorAll("#args-form [name^=arg_]").forEach((i) => {
      if (!(i.name in kept)) return;
      if (i.type === "checkbox") i.checked = kept[i.name]; else if (kept[i.name] !== "") i.value = kept[i.name];
    });
  });
})();

// A run in progress: elapsed time, the Run button disabled, and Cancel, which asks the server to kill the
// sandbox (the run's own request then answers "cancelled"); each run carries a fresh key to cancel it by.
(function () {
  "use strict";
  const form = document.getElementById("tool-form");
  const progress = document.getElementById("run-progress");
  const elapsed = document.getElementById("run-elapsed");
  const cancelButton = document.getElementById("cancel-run");
  const keyInput = document.getElementById("run-key");
  if (!form || !progress) return;
  let timer = null, started = 0, running = false;
  const isRun = (e) => e.detail.target && e.detail.target.id === "run-result";
  const runButton = () => document.getElementById("run-tool");
  const newKey = () => (window.crypto && crypto.randomUUID ? crypto.randomUUID()
    : String(Date.now()) + Math.random().toString(16).slice(2));

  document.body.addEventListener("htmx:configRequest", (e) => {
    if (!isRun(e) || running) return;
    keyInput.value = newKey();
    e.detail.parameters.run_key = keyInput.value;
  });
  document.body.addEventListener("htmx:beforeRequest", (e) => {
    if (!isRun(e)) return;
    if (running) { e.preventDefault(); return; }
    running = true;
    started = performance.now();
    elapsed.textContent = "0.0 s";
    progress.hidden = false;
    cancelButton.disabled = false;
    cancelButton.textContent = "Cancel";
    const b = runButton(); if (b) b.disabled = true;
    timer = setInterval(() => { elapsed.textContent = ((performance.now() - started) / 1000).toFixed(1) + " s"; }, 100);
  });
  document.body.addEventListener("htmx:afterRequest", (e) => {
    if (!isRun(e)) return;
    running = false;
    clearInterval(timer);
    progress.hidden = true;
    const b = runButton(); if (b) b.disabled = false;
  });
  // The schema preview re-renders the form (and the Run button) while a run may be going on.
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.detail.target.id === "schema-panel" && running) { const b = runButton(); if (b) b.disabled = true; }
  });

  async function cancel(tries) {
    const body = new URLSearchParams({run_key: keyInput.value});
    const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    const r = await fetch(cancelButton.dataset.url, {method: "POST", body, headers: csrf, credentials: "same-origin"});
    const answer = r.ok ? await r.json() : {cancelled: false};
    // The run's request may not have reached the sandbox yet: ask again shortly.
    if (!answer.cancelled && running && tries > 0) setTimeout(() => cancel(tries - 1), 250);
  }
  cancelButton.addEventListener("click", () => {
    if (!running) return;
    cancelButton.disabled = true;
    cancelButton.textContent = "Cancelling…";
    cancel(20);
  });
})();
