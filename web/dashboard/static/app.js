// bex dashboard: live parts of the pages. Everything works without it;
// with it, [data-refresh] sections reload in place, [data-stream] logs
// follow server-sent events, [data-copy] buttons copy, [data-confirm]
// forms ask first and a [data-console] form runs its command attached,
// over a WebSocket (web/dashboard/runconsole.go says its messages).
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

  // runConsole runs form's command attached: output to #console-output as
  // it comes, #console-input's lines as its input. The output's
  // data-console-state is running, then exited (data-exit-code set) or
  // failed.
  function runConsole(form) {
    if (!window.WebSocket || !window.TextDecoder) { return; }
    var session = document.getElementById("console-session");
    var out = document.getElementById("console-output");
    var input = document.getElementById("console-input");
    var ws = null;
    function append(text, cls) {
      var atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      var span = document.createElement("span");
      if (cls) { span.className = cls; }
      span.textContent = text;
      out.appendChild(span);
      if (atEnd) { out.scrollTop = out.scrollHeight; }
    }
    function end(state, text) {
      out.setAttribute("data-console-state", state);
      append(text, "console-end");
      ws = null;
      input.elements.line.disabled = true;
    }
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      if (ws) { ws.close(); }
      var u = new URL(form.getAttribute("data-console"), location.href);
      u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
      u.searchParams.set("command", form.elements.command.value);
      u.searchParams.set("csrf", form.elements.csrf.value);
      out.textContent = "";
      out.removeAttribute("data-exit-code");
      out.setAttribute("data-console-state", "running");
      session.hidden = false;
      input.elements.line.disabled = false;
      append("$ " + form.elements.command.value + "\n", "console-echo");
      var decoders = { 1: new TextDecoder(), 2: new TextDecoder() };
      var sock = new WebSocket(u.toString());
      sock.binaryType = "arraybuffer";
      ws = sock;
      sock.onmessage = function (m) {
        if (typeof m.data === "string") {
          var msg = JSON.parse(m.data);
          if (msg.error) { end("failed", "[" + msg.error + "]\n"); return; }
          var x = msg.exit;
          out.setAttribute("data-exit-code", String(x.exitCode));
          end("exited", "[run." + x.run + " on v" + x.release + ": exit " + x.exitCode + (x.reason ? ", " + x.reason : "") + "]\n");
          return;
        }
        var b = new Uint8Array(m.data);
        var d = decoders[b[0]];
        if (d) { append(d.decode(b.subarray(1), { stream: true }), b[0] === 2 ? "console-stderr" : ""); }
      };
      sock.onclose = function () {
        if (ws === sock) { end("failed", "[the console's connection closed before the command ended]\n"); }
      };
      input.elements.line.focus();
    });
    input.addEventListener("submit", function (e) {
      e.preventDefault();
      if (!ws || ws.readyState !== WebSocket.OPEN) { return; }
      var line = input.elements.line.value;
      ws.send(new TextEncoder().encode(line + "\n"));
      append(line + "\n", "console-echo");
      input.elements.line.value = "";
    });
    document.getElementById("console-eof").addEventListener("click", function () {
      if (ws && ws.readyState === WebSocket.OPEN) { ws.send("eof"); input.elements.line.disabled = true; }
    });
    document.getElementById("console-stop").addEventListener("click", function () {
      if (ws) { var sock = ws; ws = null; sock.close(); end("failed", "[stopped from the page]\n"); }
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
    document.querySelectorAll("form[data-console]").forEach(runConsole);
    document.documentElement.setAttribute("data-live", "on");
  });
})();
