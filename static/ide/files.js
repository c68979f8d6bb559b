// The Folders page: files dropped or chosen are uploaded one request each, with a progress bar per file; the row the
// server answers then polls its processing status (htmx). A refusal (type, size) shows its message in the row.
(function () {
  "use strict";
  const zone = document.getElementById("dropzone");
  const rows = document.getElementById("files-rows");

  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (e) => { if (!window.confirm(form.dataset.confirm)) e.preventDefault(); });
  });
  if (!zone || !rows) return;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function csrf() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }

  function bytes(n) {  // as the server's filesizeformat writes it
    if (n < 1024) return n + (n === 1 ? " byte" : " bytes");
    const units = ["KB", "MB", "GB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(1) + " " + units[i];
  }
  function pendingRow(file) {
    const tr = el("tr", "file-row upload-row");
    tr.dataset.status = "uploading";
    const name = el("td", "file-name", file.name);
    const size = el("td", "small file-size", bytes(file.size));
    const status = el("td", "file-status");
    const badge = el("span", "badge running", "uploading");
    const pct = el("span", "muted small upload-pct", " 0%");
    const bar = el("progress");
    bar.max = 100; bar.value = 0;
    bar.setAttribute("aria-label", "Upload of " + file.name);
    status.append(badge, pct, bar);
    tr.append(name, size, status, el("td"));
    return {tr, bar, pct, status};
  }

  function fail(row, message) {
    row.tr.dataset.status = "refused";
    row.status.textContent = "";
    row.status.append(el("span", "badge err", "refused"), el("div", "error small file-error", message));
    const dismiss = el("button", "small ghost", "✕");
    dismiss.type = "button"; dismiss.title = "Dismiss"; dismiss.setAttribute("aria-label", "Dismiss");
    dismiss.addEventListener("click", () => row.tr.remove());
    row.tr.lastElementChild.appendChild(dismiss);
  }

  function upload(file) {
    const row = pendingRow(file);
    rows.prepend(row.tr);
    const empty = document.getElementById("no-files");
    if (empty) empty.remove();
    const max = Number(zone.dataset.maxBytes || 0);
    if (max && file.size > max) {
      fail(row, `${file.name} is ${file.size} bytes; files in folders may be at most ${max} bytes.`);
      return;
    }
    const xhr = new XMLHttpRequest();
    xhr.open("POST", zone.dataset.uploadUrl);
    xhr.setRequestHeader("X-CSRFToken", csrf());
    xhr.upload.addEventListener("progress", (e) => {
      if (!e.lengthComputable) return;
      const p = Math.round((e.loaded / e.total) * 100);
      row.bar.value = p; row.pct.textContent = " " + p + "%";
    });
    xhr.addEventListener("load", () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        const t = document.createElement("template");
        t.innerHTML = xhr.responseText.trim();  // the server's row, rendered and escaped by its template
        const fresh = t.content.firstElementChild;
        const old = fresh && document.getElementById(fresh.id);
        if (old && old !== row.tr) old.remove();  // a duplicate skipped: the existing file's row
        row.tr.replaceWith(fresh);
        if (window.htmx) htmx.process(fresh);
      } else {
        fail(row, xhr.responseText || `The upload failed (HTTP ${xhr.status}).`);
      }
    });
    xhr.addEventListener("error", () => fail(row, "The upload failed: the connection was lost."));
    const body = new FormData();
    body.append("file", file, file.name);
    xhr.send(body);
  }

  // a file dropped beside the zone would otherwise replace the page with itself
  ["dragover", "drop"].forEach((n) => document.addEventListener(n, (e) => { if (!zone.contains(e.target)) e.preventDefault(); }));
  const input = document.getElementById("file-input");
  input.addEventListener("change", () => { Array.from(input.files).forEach(upload); input.value = ""; });
  ["dragenter", "dragover"].forEach((n) => zone.addEventListener(n, (e) => { e.preventDefault(); zone.classList.add("over"); }));
  ["dragleave", "dragend"].forEach((n) => zone.addEventListener(n, () => zone.classList.remove("over")));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    Array.from((e.dataTransfer && e.dataTransfer.files) || []).forEach(upload);
  });
  zone.dataset.ready = "true";  // files dropped from now on are uploaded (tests wait for it)
})();
