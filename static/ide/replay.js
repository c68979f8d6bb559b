// Replay page: mark overrides as edited while typing (and revert them), and say the models are being asked.
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
  form.addEventListener("submit", () => {
    const btn = document.getElementById("replay-submit");
    // disabled after the submit has been collected, so the form still posts
    setTimeout(() => { btn.disabled = true; btn.textContent = "Replaying…"; }, 0);
    document.getElementById("replay-waiting").hidden = false;
  });
})();
