// synth view: progressive enhancements only; every page works without this file.
(function () {
  "use strict";
  // Filter selects on the env list and the calls table submit as soon as they change.
  document.querySelectorAll("form.filters select").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.submit(); });
  });
  // "Expand all" / "Collapse all" buttons toggle every <details> inside their section.
  document.querySelectorAll("button[data-toggle-details]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var scope = document.getElementById(btn.getAttribute("data-toggle-details"));
      if (!scope) return;
      var all = scope.querySelectorAll("details");
      var open = Array.prototype.some.call(all, function (d) { return !d.open; });
      all.forEach(function (d) { d.open = open; });
      btn.textContent = open ? "Collapse all" : "Expand all";
    });
  });
  // Buttons that start slow server work (replay, tool calls) say so and cannot be pressed twice.
  document.querySelectorAll("form[data-busy]").forEach(function (form) {
    form.addEventListener("submit", function () {
      var btn = form.querySelector("button[type=submit], button:not([type])");
      if (btn) { btn.disabled = true; btn.textContent = form.getAttribute("data-busy"); }
    });
  });
})();
