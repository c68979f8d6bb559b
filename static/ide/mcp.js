// The MCP page: while a request that may start a server waits (adding one, refreshing one), what the server being
// started is doing — a package runner's first start installs its package, which takes a while — is read every
// second from the server and shown beside the busy indicator.
(function () {
  const box = () => document.getElementById("mcp-starting");
  let timer = null;

  function poll() {
    const el = box();
    if (!el) return;
    fetch(el.dataset.url, {headers: {"HX-Request": "true"}, credentials: "same-origin"})
      .then((r) => (r.ok ? r.text() : ""))
      .then((html) => { if (timer) el.innerHTML = html; })
      .catch(() => {});
  }

  function startsServer(elt) {
    return elt && (elt.id === "mcp-new" || (elt.closest && elt.closest("[data-mcp-refresh]")));
  }

  document.addEventListener("htmx:beforeRequest", (e) => {
    if (!startsServer(e.target) || timer) return;
    timer = setInterval(poll, 1000);
    poll();
  });
  document.addEventListener("htmx:afterRequest", (e) => {
    if (!startsServer(e.target) || !timer) return;
    clearInterval(timer);
    timer = null;
    const el = box();
    if (el) el.innerHTML = "";
  });
})();
