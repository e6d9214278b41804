// notifyd dashboard: the only script. Every page works without it; it adds
// (1) live refresh of <main data-refresh="N"> every N seconds, swapping in
// the freshly rendered <main> (paused while the tab is hidden or a form
// field has focus), and (2) the select-all checkbox of the dead letters.
"use strict";
(function () {
  function busy() {
    var a = document.activeElement;
    return !!a && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName) && a.type !== "checkbox";
  }

  function schedule() {
    var main = document.getElementById("content");
    var secs = main ? parseInt(main.getAttribute("data-refresh") || "0", 10) : 0;
    if (secs > 0) setTimeout(refresh, secs * 1000);
  }

  function refresh() {
    if (document.hidden || busy()) { schedule(); return; }
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        // Logged out meanwhile (redirected to the login form) or an error
        // page: show it the ordinary way.
        if (r.redirected || !r.ok) { location.reload(); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null) return;
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("content");
        var main = document.getElementById("content");
        if (!fresh || !main) { location.reload(); return; }
        main.replaceWith(document.adoptNode(fresh));
        schedule();
      })
      .catch(schedule); // network blip: try again next time
  }

  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!box.matches || !box.matches("input[data-select-all]")) return;
    var form = box.form || document;
    form.querySelectorAll('input[type=checkbox][name=id]').forEach(function (c) { c.checked = box.checked; });
  });

  schedule();
})();
