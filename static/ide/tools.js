// Tools page: CodeMirror editor (Python highlighting) over the source textarea; the schema preview is an htmx
// request fired (debounced) on each edit. It posts the arguments form too, and the server draws it again for the new
// schema keeping the values the person changed (tools.views.schema_preview).
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
  document.body.addEventListener("htmx:configRequest", () => { if (cm) cm.save(); });
})();

// A run in progress: elapsed time, the Run button disabled, and what the tool prints as it prints it (server-sent
// events from the run's key); each run carries a fresh key to follow it by, and to cancel it by (#cancel-run, htmx).
(function () {
  "use strict";
  const form = document.getElementById("tool-form");
  const progress = document.getElementById("run-progress");
  const keyInput = document.getElementById("run-key");
  const liveOut = document.getElementById("run-live");
  if (!form || !progress) return;
  let timer = null, running = false, source = null;

  function follow(key) {
    liveOut.textContent = "";
    liveOut.hidden = true;
    if (!form.dataset.streams) return;
    source = new EventSource(progress.dataset.outputUrl + "?run_key=" + encodeURIComponent(key));
    const add = (stream) => (e) => {  // one span a chunk, its stream's colour (tool_form.css .live-stderr)
      liveOut.appendChild(Object.assign(document.createElement("span"), {className: "live-" + stream, textContent: JSON.parse(e.data)}));
      liveOut.hidden = false;
      liveOut.scrollTop = liveOut.scrollHeight;
    };
    source.addEventListener("stdout", add("stdout"));
    source.addEventListener("stderr", add("stderr"));
    source.addEventListener("end", () => source.close());
  }
  const isRun = (e) => e.detail.target && e.detail.target.id === "run-result";
  const disableRun = (off) => { const b = document.getElementById("run-tool"); if (b) b.disabled = off; };

  document.body.addEventListener("htmx:configRequest", (e) => {
    if (!isRun(e) || running) return;
    // randomUUID needs a secure context: a server reached over plain http on the LAN has none
    keyInput.value = window.crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2);
    e.detail.parameters.run_key = keyInput.value;
  });
  document.body.addEventListener("htmx:beforeRequest", (e) => {
    if (!isRun(e)) return;
    if (running) { e.preventDefault(); return; }
    running = true;
    const started = performance.now(), elapsed = document.getElementById("run-elapsed");
    elapsed.textContent = "0.0 s";
    progress.hidden = false;
    follow(keyInput.value);
    disableRun(true);
    timer = setInterval(() => { elapsed.textContent = ((performance.now() - started) / 1000).toFixed(1) + " s"; }, 100);
  });
  document.body.addEventListener("htmx:afterRequest", (e) => {
    if (!isRun(e)) return;
    running = false;
    clearInterval(timer);
    if (source) source.close();
    progress.hidden = true;
    disableRun(false);
  });
  // The schema preview re-renders the form (and the Run button) while a run may be going on.
  document.body.addEventListener("htmx:afterSwap", (e) => { if (e.detail.target.id === "schema-panel" && running) disableRun(true); });
})();
