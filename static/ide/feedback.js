// Plain (non-htmx) forms marked data-confirm ask before they are sent (e.g. a delete). Those marked data-busy (or
// sent by a button marked so) show progress like htmx requests do: on submit the pressed button is disabled and busy,
// the others disabled, and the form gets .is-busy (shows its .busy status). [data-copy] buttons copy the text of the
// element they name. [data-reveal] elements are scrolled into view when they appear.
(function () {
  "use strict";

  function markBusy(form, submitter) {
    const buttons = form.querySelectorAll("button[type=submit], button:not([type]), input[type=submit]");
    // after the submit has collected the form's data, so the pressed button's name=value is still sent
    setTimeout(function () {
      buttons.forEach(function (b) { b.disabled = true; });
      if (submitter) submitter.setAttribute("aria-busy", "true");
      form.classList.add("is-busy");
    }, 0);
  }

  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
    if (!(form instanceof HTMLFormElement) || event.defaultPrevented) return;
    if (!form.hasAttribute("data-busy") && !(event.submitter && event.submitter.hasAttribute("data-busy"))) return;
    if (form.classList.contains("is-busy")) { event.preventDefault(); return; }
    markBusy(form, event.submitter);
  });

  // Back to a page kept by the browser's cache: its forms are usable again.
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;
    document.querySelectorAll("form.is-busy").forEach(function (form) {
      form.classList.remove("is-busy");
      form.querySelectorAll("[aria-busy]").forEach(function (b) { b.removeAttribute("aria-busy"); });
      form.querySelectorAll("button, input[type=submit]").forEach(function (b) { b.disabled = false; });
    });
  });

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    const source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    const label = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", label);
    copyText(source.textContent.trim()).then(
      function () { button.textContent = "Copied"; button.classList.add("copied"); },
      function () { button.textContent = "Select and copy"; window.getSelection().selectAllChildren(source); }
    );
    setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 2500);
  });

  function reveal(root) {
    const el = root.querySelector ? root.querySelector("[data-reveal]") : null;
    if (!el) return;
    el.scrollIntoView({ block: "center" });
    const focus = el.matches("button, a, input, [tabindex]") ? el : el.querySelector("button, a[href], input");
    if (focus) focus.focus({ preventScroll: true });
  }

  document.addEventListener("DOMContentLoaded", function () { reveal(document); });
  document.addEventListener("htmx:afterSettle", function (event) { reveal(event.detail.elt || document); });
})();
