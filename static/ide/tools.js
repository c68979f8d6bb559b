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
