// Replay page: mark overrides as edited while typing (and revert them). The form is data-busy (feedback.js).
(function () {
  "use strict";
  const form = document.getElementById("replay-form");
  if (!form) return;
  form.querySelectorAll("textarea[data-original-id]").forEach((area) => {
    const original = document.getElementById(area.dataset.originalId).content.textContent;
    const mark = form.querySelector(`[data-edited-for="${CSS.escape(area.name)}"]`);
    const revert = form.querySelector(`[data-revert="${CSS.escape(area.name)}"]`);
    const update = () => {
      const edited = area.value.replace(/\r\n/g, "\n") !== original;
      if (mark) mark.hidden = !edited;
      if (revert) revert.hidden = !edited;
    };
    area.addEventListener("input", update);
    if (revert) revert.addEventListener("click", () => { area.value = original; update(); area.focus(); });
    update();
  });
})();
