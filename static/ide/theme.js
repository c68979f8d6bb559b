// Light/dark theme: follows the system (prefers-color-scheme, live) until the person picks one with the toggle;
// the pick is remembered in localStorage. Runs in <head>, so the page is painted in the right theme at once.
// The stylesheet only knows data-theme="light" | "dark"; data-theme-source says whether it was picked.
(function () {
  "use strict";
  const root = document.documentElement;
  const system = matchMedia("(prefers-color-scheme: dark)");
  function saved() { try { return localStorage.getItem("aide-theme"); } catch (e) { return null; } }
  function label() {
    const btn = document.getElementById("theme-toggle");
    if (!btn) return;
    btn.title = "Switch to the " + (root.dataset.theme === "dark" ? "light" : "dark") + " theme";
    btn.setAttribute("aria-label", btn.title);
  }
  function apply() {
    const pick = saved();
    root.dataset.theme = pick === "dark" || pick === "light" ? pick : (system.matches ? "dark" : "light");
    root.dataset.themeSource = pick ? "picked" : "system";
    label();
  }
  apply();
  system.addEventListener("change", apply);
  window.addEventListener("storage", (e) => { if (e.key === "aide-theme") apply(); });  // picked in another tab
  document.addEventListener("DOMContentLoaded", function () {
    const btn = document.getElementById("theme-toggle");
    if (!btn) return;
    label();
    btn.addEventListener("click", function () {
      const next = root.dataset.theme === "dark" ? "light" : "dark";
      try { localStorage.setItem("aide-theme", next); } catch (e) { /* private mode: not remembered */ }
      root.dataset.theme = next;
      root.dataset.themeSource = "picked";
      label();
    });
  });
})();
