// The Folders page: files dropped or chosen are uploaded one request each, each in a row of the page's template
// (#upload-row) with its progress bar; the row the server answers then polls its processing status (htmx). A refusal
// (type, size) shows its message in the row.
(function () {
  "use strict";
  const zone = document.getElementById("dropzone");
  const rows = document.getElementById("files-rows");
  if (!zone || !rows) return;

  function bytes(n) {  // as the server's filesizeformat writes it
    if (n < 1024) return n + (n === 1 ? " byte" : " bytes");
    const units = ["KB", "MB", "GB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(1) + " " + units[i];
  }
  function fail(tr, message) {
    tr.dataset.status = "refused";
    tr.querySelector(".file-error").textContent = message;
  }

  function upload(file) {
    const tr = document.getElementById("upload-row").content.firstElementChild.cloneNode(true);
    tr.querySelector(".file-name").textContent = file.name;
    tr.querySelector(".file-size").textContent = bytes(file.size);
    tr.querySelector("progress").setAttribute("aria-label", "Upload of " + file.name);
    rows.prepend(tr);
    const empty = document.getElementById("no-files");
    if (empty) empty.remove();
    const max = Number(zone.dataset.maxBytes || 0);
    if (max && file.size > max) { fail(tr, `${file.name} is ${file.size} bytes; files in folders may be at most ${max} bytes.`); return; }
    const xhr = new XMLHttpRequest();
    xhr.open("POST", zone.dataset.uploadUrl);
    xhr.setRequestHeader("X-CSRFToken", JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "");
    xhr.upload.addEventListener("progress", (e) => {
      if (!e.lengthComputable) return;
      const p = Math.round((e.loaded / e.total) * 100);
      tr.querySelector("progress").value = p;
      tr.querySelector(".upload-pct").textContent = ` ${p}%`;
    });
    xhr.addEventListener("load", () => {
      if (xhr.status < 200 || xhr.status >= 300) { fail(tr, xhr.responseText || `The upload failed (HTTP ${xhr.status}).`); return; }
      const old = document.getElementById(/id="([^"]+)"/.exec(xhr.responseText)[1]);
      if (old) old.remove();  // a duplicate skipped: the existing file's row
      htmx.swap(tr, xhr.responseText, {swapStyle: "outerHTML"});  // the server's row, rendered and escaped by its template
    });
    xhr.addEventListener("error", () => fail(tr, "The upload failed: the connection was lost."));
    const body = new FormData();
    body.append("file", file, file.name);
    xhr.send(body);
  }

  rows.addEventListener("click", (e) => { if (e.target.closest("[data-dismiss]")) e.target.closest("tr").remove(); });
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
