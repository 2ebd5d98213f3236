// bex dashboard: live parts of the pages. Everything works without it;
// with it, [data-refresh] sections reload in place, [data-stream] logs
// follow server-sent events, [data-copy] buttons copy and [data-confirm]
// forms ask first.
"use strict";
(function () {
  // reload swaps the elements with these ids for the ones of a fresh copy
  // of the page.
  function reload(ids) {
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        ids.forEach(function (id) {
          var el = document.getElementById(id), fresh = doc.getElementById(id);
          if (el && fresh && fresh.innerHTML !== el.innerHTML) { el.innerHTML = fresh.innerHTML; }
        });
      })
      .catch(function () {});
  }

  function refresh(el) {
    var every = parseInt(el.getAttribute("data-refresh"), 10) || 3000;
    setInterval(function () {
      if (!document.hidden) { reload([el.id]); }
    }, every);
  }

  function stream(el) {
    var src = new EventSource(el.getAttribute("data-stream"));
    var first = true;
    var onEnd = el.getAttribute("data-refresh-on-end");
    function append(text) {
      var atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
      if (first) { el.textContent = ""; first = false; }
      el.appendChild(document.createTextNode(text + "\n"));
      if (atEnd) { el.scrollTop = el.scrollHeight; }
    }
    src.addEventListener("line", function (e) { append(e.data); });
    src.addEventListener("end", function (e) {
      src.close();
      el.setAttribute("data-ended", e.data);
      if (onEnd) { reload([onEnd]); }
    });
    src.addEventListener("failed", function (e) {
      src.close();
      append("[" + e.data + "]");
      el.setAttribute("data-ended", "failed");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh][id]").forEach(refresh);
    document.querySelectorAll("[data-stream]").forEach(stream);
    document.querySelectorAll("[data-copy]").forEach(function (b) {
      b.addEventListener("click", function () {
        var input = document.querySelector(b.getAttribute("data-copy"));
        input.select();
        if (navigator.clipboard) { navigator.clipboard.writeText(input.value).catch(function () {}); }
        b.textContent = "Copied";
      });
    });
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (e) {
        if (!confirm(f.getAttribute("data-confirm"))) { e.preventDefault(); }
      });
    });
    document.documentElement.setAttribute("data-live", "on");
  });
})();
