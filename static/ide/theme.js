// Light/dark theme: follows the system unless the person picked one (remembered in localStorage).
(function () {
  const saved = localStorage.getItem("aide-theme");
  if (saved) document.documentElement.dataset.theme = saved;
  document.addEventListener("DOMContentLoaded", function () {
    const btn = document.getElementById("theme-toggle");
    if (!btn) return;
    btn.addEventListener("click", function () {
      const cur = document.documentElement.dataset.theme;
      const dark = cur === "dark" || (cur === "auto" && matchMedia("(prefers-color-scheme: dark)").matches);
      const next = dark ? "light" : "dark";
      document.documentElement.dataset.theme = next;
      localStorage.setItem("aide-theme", next);
    });
  });
})();
