// Light/dark theme: follows the system (prefers-color-scheme, live) until the person picks one with the toggle;
// the pick is remembered in localStorage. Runs in <head>, so the page is painted in the right theme at once.
// The stylesheet only knows data-theme="light" | "dark"; data-theme-source says whether it was picked.
(function () {
  "use strict";
  const root = document.documentElement, system = matchMedia("(prefers-color-scheme: dark)");
  function show(pick) {
    root.dataset.theme = pick || (system.matches ? "dark" : "light");
    root.dataset.themeSource = pick ? "picked" : "system";
    const btn = document.getElementById("theme-toggle");
    if (btn) btn.title = "Switch to the " + (root.dataset.theme === "dark" ? "light" : "dark") + " theme";
    if (btn) btn.setAttribute("aria-label", btn.title);
  }
  function saved() { try { return ["dark", "light"].find((t) => t === localStorage.getItem("aide-theme")); } catch (e) { return undefined; } }
  show(saved());
  system.addEventListener("change", () => show(saved()));
  window.addEventListener("storage", (e) => { if (e.key === "aide-theme") show(saved()); });  // picked in another tab
  document.addEventListener("DOMContentLoaded", () => show(saved()));  // the button's label
  document.addEventListener("click", (e) => {
    if (!e.target.closest("#theme-toggle")) return;
    const next = root.dataset.theme === "dark" ? "light" : "dark";
    try { localStorage.setItem("aide-theme", next); } catch (err) { /* private mode: not remembered */ }
    show(next);
  });
})();
