// Tools page: CodeMirror editor (Python highlighting) over the source textarea; the schema preview is an htmx
// request fired (debounced) on each edit; argument values the person changed survive the preview re-rendering the
// form (what the form drew — a default, the last run's value — is drawn again by the server, for the new schema).
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
  const changed = (i) => (i.type === "checkbox" ? i.checked !== i.defaultChecked
    : i.tagName === "SELECT" ? !(i.selectedOptions[0] && i.selectedOptions[0].defaultSelected)
    : i.value !== i.defaultValue);
  document.body.addEventListener("htmx:configRequest", () => { if (cm) cm.save(); });
  document.body.addEventListener("htmx:beforeSwap", (e) => {
    if (e.detail.target.id !== "schema-panel") return;
    kept = {};
    document.querySelectorAll("#args-form [name^=arg_]").forEach((i) => {
      if (changed(i)) kept[i.name] = i.type === "checkbox" ? i.checked : i.value;
    });
  });
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.detail.target.id !== "schema-panel") return;
    document.querySelectorAll("#args-form [name^=arg_]").forEach((i) => {
      if (!(i.name in kept)) return;
      const v = kept[i.name];
      if (i.type === "checkbox") i.checked = v;
      else if (i.tagName !== "SELECT" || Array.from(i.options).some((o) => o.value === v)) i.value = v;
    });
  });
})();

// A run in progress: elapsed time, the Run button disabled, what the tool prints as it prints it (server-sent
// events from the run's key), and Cancel, which asks the server to kill the sandbox (the run's own request then
// answers "cancelled"); each run carries a fresh key to cancel and follow it by.
(function () {
  "use strict";
  const form = document.getElementById("tool-form");
  const progress = document.getElementById("run-progress");
  const elapsed = document.getElementById("run-elapsed");
  const cancelButton = document.getElementById("cancel-run");
  const keyInput = document.getElementById("run-key");
  const liveOut = document.getElementById("run-live");
  if (!form || !progress) return;
  let timer = null, started = 0, running = false, source = null;

  function follow(key) {
    liveOut.textContent = "";
    liveOut.hidden = true;
    if (!form.dataset.streams || !window.EventSource) return;
    source = new EventSource(progress.dataset.outputUrl + "?run_key=" + encodeURIComponent(key));
    const add = (stream) => (e) => {
      const part = document.createElement("span");
      part.className = "live-" + stream;
      part.textContent = JSON.parse(e.data);
      liveOut.appendChild(part);
      liveOut.hidden = false;
      liveOut.scrollTop = liveOut.scrollHeight;
    };
    source.addEventListener("stdout", add("stdout"));
    source.addEventListener("stderr", add("stderr"));
    source.addEventListener("end", unfollow);
  }
  function unfollow() { if (source) { source.close(); source = null; } }
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
    follow(keyInput.value);
    const b = runButton(); if (b) b.disabled = true;
    timer = setInterval(() => { elapsed.textContent = ((performance.now() - started) / 1000).toFixed(1) + " s"; }, 100);
  });
  document.body.addEventListener("htmx:afterRequest", (e) => {
    if (!isRun(e)) return;
    running = false;
    clearInterval(timer);
    unfollow();
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
