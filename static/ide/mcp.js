// The MCP page: while a request that may start a server waits (adding one, refreshing one), what the server being
// started is doing — a package runner's first start installs its package, which takes a while — is read every
// second from the server (tools/_mcp_starting.html) and shown beside the busy indicator.
(function () {
  "use strict";
  let timer = null, last = Promise.resolve();
  const startsServer = (elt) => elt.id === "mcp-new" || elt.closest("[data-mcp-refresh]");
  const poll = () => { last = htmx.ajax("GET", document.getElementById("mcp-starting").dataset.url, "#mcp-starting"); };
  document.addEventListener("htmx:beforeRequest", (e) => {
    if (!startsServer(e.target) || timer) return;
    timer = setInterval(poll, 1000);
    poll();
  });
  document.addEventListener("htmx:afterRequest", (e) => {  // the last reading goes once it has landed
    if (!startsServer(e.target) || !timer) return;
    clearInterval(timer);
    timer = null;
    last.then(() => { document.getElementById("mcp-starting").textContent = ""; });
  });
})();
