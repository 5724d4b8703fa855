// The step timeline (kernlint.report.step_view): one step's lanes (CPU ops, launches, device streams) drawn as
// SVG from the JSON beside it. Mouse wheel: zoom around the pointer; drag: pan; double-click or "whole step":
// reset; the search box highlights the device events whose name holds the text; a click shows an event.
// And "Open in Perfetto" (kernlint.report.perfetto): the embedded trace posted to ui.perfetto.dev.
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var LABEL = 190, WIDTH = 1000, ROW = 18, GAP = 6, TOP = 16, AXIS = 22, MIN_SPAN = 0.05;
  var DEVICE = {kernel: 1, memcpy: 1, memset: 1};

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVGNS, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function fmt(us) {
    var a = Math.abs(us);
    if (a >= 1000) { return (us / 1000).toFixed(a >= 100000 ? 0 : a >= 10000 ? 1 : 2) + " ms"; }
    if (a >= 1 || a === 0) { return us.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2) + " µs"; }
    return (us * 1000).toFixed(0) + " ns";
  }

  function Step(box) {
    var data = JSON.parse(box.querySelector("script.kl-stepline-data").textContent);
    var ev = data.ev, S = data.strings, kinds = data.kinds, n = ev[0].length;
    var lane = ev[0], depth = ev[1], start = ev[2], dur = ev[3], kind = ev[4], cat = ev[5], name = ev[6];
    var op = ev[7], source = ev[8], args = ev[9], mark = ev[10], finding = ev[11], count = ev[12];
    var tops = [], y = TOP;
    data.lanes.forEach(function (_, i) { tops.push(y); y += data.depths[i] * ROW + GAP; });
    var plotHeight = y, height = y + AXIS;
    var svg = el("svg", {"class": "kl-stepline", width: LABEL + WIDTH + 10, height: height,
                         viewBox: "0 0 " + (LABEL + WIDTH + 10) + " " + height, role: "img",
                         "aria-label": "timeline of " + data.title}, box.querySelector(".kl-stepline-canvas"));
    data.lanes.forEach(function (label, i) {
      el("rect", {"class": "lane-bg", x: LABEL, y: tops[i], width: WIDTH, height: data.depths[i] * ROW}, svg);
      el("text", {"class": "lane-label", x: 4, y: tops[i] + 13}, svg).textContent = label;
    });
    // A nested <svg> clips the bars to the plot; its x scale is redrawn on every zoom and pan.
    var plot = el("svg", {x: LABEL, y: 0, width: WIDTH, height: plotHeight, "class": "kl-stepline-plot"}, svg);
    el("rect", {"class": "kl-stepline-hit-area", x: 0, y: 0, width: WIDTH, height: plotHeight}, plot);
    var rects = [], marks = [];
    for (var i = 0; i < n; i++) {
      var k = kinds[kind[i]];
      var cls = "kl-ev kl-ev-" + k + (DEVICE[k] ? " kl-ev-device cat-" + S[cat[i]] : "");
      if (k === "merged" && S[cat[i]] === "merged-device") { cls += " kl-ev-merged-device"; }
      if (mark[i]) { cls += " kl-ev-" + mark[i]; }
      var r = el("rect", {"class": cls, y: tops[lane[i]] + depth[i] * ROW + 1, height: ROW - 2, "data-i": i}, plot);
      var tip = el("title", {}, r);
      tip.textContent = S[name[i]] + "\n" + fmt(dur[i]) + (S[op[i]] ? "\n" + S[op[i]] : "");
      rects.push(r);
      if (mark[i]) {
        var m = el("text", {"class": mark[i] === "anchor" ? "anchor-label" : "marker-label",
                            y: Math.max(tops[lane[i]] + depth[i] * ROW - 2, 10)}, plot);
        m.textContent = "▼";
        marks.push([m, i]);
      }
    }
    var axis = el("g", {"class": "kl-stepline-axis"}, svg);
    el("line", {"class": "axis", x1: LABEL, y1: plotHeight + 2, x2: LABEL + WIDTH, y2: plotHeight + 2}, axis);
    var ticks = [];
    for (var t = 0; t <= 5; t++) { ticks.push(el("text", {"class": "tick", y: plotHeight + 16}, axis)); }
    var range = box.querySelector(".kl-stepline-range");
    var view = {a: 0, b: data.span};

    function render() {
      var k = WIDTH / (view.b - view.a);
      for (var i = 0; i < n; i++) {
        var x = (start[i] - view.a) * k, w = Math.max(dur[i] * k, 1);
        if (x + w < -5 || x > WIDTH + 5) { rects[i].setAttribute("display", "none"); continue; }
        rects[i].removeAttribute("display");
        var left = Math.max(x, -5);
        rects[i].setAttribute("x", left.toFixed(2));
        rects[i].setAttribute("width", Math.max(Math.min(x + w, WIDTH + 5) - left, 1).toFixed(2));
      }
      marks.forEach(function (p) { p[0].setAttribute("x", ((start[p[1]] - view.a) * k - 4).toFixed(2)); });
      ticks.forEach(function (node, j) {
        node.setAttribute("x", LABEL + j * WIDTH / 5 - (j === 5 ? 60 : 0));
        node.textContent = "+" + fmt(view.a + (view.b - view.a) * j / 5);
      });
      svg.setAttribute("data-view-start", view.a.toFixed(4));
      svg.setAttribute("data-view-end", view.b.toFixed(4));
      if (range) { range.textContent = "+" + fmt(view.a) + " … +" + fmt(view.b) + " of " + fmt(data.span); }
    }

    function show(a, b) {
      var span = Math.min(Math.max(b - a, MIN_SPAN), data.span);
      a = Math.min(Math.max(a, 0), data.span - span);
      view.a = a;
      view.b = a + span;
      render();
    }

    function timeAt(clientX) {
      var rect = plot.getBoundingClientRect();
      var f = Math.min(Math.max((clientX - rect.left) / rect.width, 0), 1);
      return [view.a + f * (view.b - view.a), f];
    }

    plot.addEventListener("wheel", function (e) {
      e.preventDefault();
      var at = timeAt(e.clientX), factor = e.deltaY > 0 ? 1.25 : 0.8;
      var span = (view.b - view.a) * factor;
      show(at[0] - at[1] * span, at[0] + (1 - at[1]) * span);
    }, {passive: false});
    var drag = null, dragged = false;
    plot.addEventListener("mousedown", function (e) {
      drag = {x: e.clientX, a: view.a, b: view.b};
      dragged = false;
      e.preventDefault();
    });
    window.addEventListener("mousemove", function (e) {
      if (!drag) { return; }
      var dx = e.clientX - drag.x;
      if (Math.abs(dx) > 2) { dragged = true; }
      var shift = -dx / plot.getBoundingClientRect().width * (drag.b - drag.a);
      show(drag.a + shift, drag.b + shift);
    });
    window.addEventListener("mouseup", function () { drag = null; });
    plot.addEventListener("dblclick", function () { show(0, data.span); });
    var reset = box.querySelector(".kl-stepline-reset");
    if (reset) { reset.addEventListener("click", function () { show(0, data.span); }); }

    var details = box.querySelector(".kl-stepline-details");
    var selected = null;
    function row(label, value, cls) {
      if (value === "" || value === undefined || value === null) { return; }
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = label;
      dd.textContent = value;
      if (cls) { dd.className = cls; }
      details.appendChild(dt);
      details.appendChild(dd);
    }
    plot.addEventListener("click", function (e) {
      if (dragged) { dragged = false; return; }
      var i = e.target.getAttribute && e.target.getAttribute("data-i");
      if (i === null || i === undefined) { return; }
      i = +i;
      if (selected) { selected.classList.remove("kl-ev-selected"); }
      selected = rects[i];
      selected.classList.add("kl-ev-selected");
      details.textContent = "";
      row("event", S[name[i]], "mono kl-d-name");
      row("kind", kinds[kind[i]] + (S[cat[i]] ? ", " + S[cat[i]] : ""));
      row("op", S[op[i]] || "-", "mono kl-d-op");
      row("source", S[source[i]] || "unknown (record with with_stack=True)", "mono kl-d-source");
      row("duration", fmt(dur[i]) + (count[i] > 1 ? " (" + count[i] + " events merged)" : ""), "kl-d-dur");
      row("starts at", "+" + fmt(start[i]) + " in the step");
      row("args", S[args[i]], "mono kl-d-args");
      if (finding[i]) {
        var dt = document.createElement("dt"), dd = document.createElement("dd"), a = document.createElement("a");
        dt.textContent = "finding";
        a.href = "#" + finding[i];
        a.textContent = finding[i];
        dd.appendChild(a);
        details.appendChild(dt);
        details.appendChild(dd);
      }
      details.hidden = false;
    });

    var search = box.querySelector(".kl-stepline-search"), hits = box.querySelector(".kl-stepline-hits");
    if (search) {
      search.addEventListener("input", function () {
        var q = search.value.trim().toLowerCase(), found = 0;
        svg.classList.toggle("kl-searching", q !== "");
        for (var i = 0; i < n; i++) {
          var hit = q !== "" && DEVICE[kinds[kind[i]]] && S[name[i]].toLowerCase().indexOf(q) >= 0;
          rects[i].classList.toggle("kl-hit", !!hit);
          if (hit) { found++; }
        }
        hits.textContent = q === "" ? "" : found + " device event" + (found === 1 ? "" : "s") + " match";
      });
    }
    render();
  }

  // --- Open in Perfetto -------------------------------------------------------------------------------------
  var ORIGIN = "https://ui.perfetto.dev";

  function bytesOf(id) {
    var text = atob(document.getElementById(id).textContent.trim());
    var out = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { out[i] = text.charCodeAt(i); }
    return out;
  }

  function openPerfetto(button) {
    var status = button.parentNode.querySelector(".kl-perfetto-status");
    var file = button.getAttribute("data-file");
    var instead = "open " + ORIGIN + ", choose \"Open trace file\" and pick " + file + ".";
    var url = ORIGIN + "/";
    var start = button.getAttribute("data-vis-start"), end = button.getAttribute("data-vis-end");
    if (start && end) { url += "?visStart=" + encodeURIComponent(start) + "&visEnd=" + encodeURIComponent(end); }
    var id = button.getAttribute("data-trace-data");
    var win = window.open(id ? url : ORIGIN + "/", "_blank");
    if (!win) {
      status.textContent = "The browser blocked the new tab: allow pop-ups for this page, or " + instead;
      return;
    }
    if (!id) { status.textContent = "In the new tab: choose \"Open trace file\" and pick " + file + "."; return; }
    var buffer = bytesOf(id).buffer, tries = 0;
    status.textContent = "Waiting for ui.perfetto.dev…";
    var timer = setInterval(function () {
      if (++tries > 75) {   // 15 s without an answer
        clearInterval(timer);
        window.removeEventListener("message", onMessage);
        status.textContent = "ui.perfetto.dev did not answer (offline?): " + instead;
        return;
      }
      win.postMessage("PING", ORIGIN);
    }, 200);
    function onMessage(e) {
      if (e.origin !== ORIGIN || e.data !== "PONG") { return; }
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      win.postMessage({perfetto: {buffer: buffer, title: button.getAttribute("data-title"), fileName: file}},
                      ORIGIN);
      status.textContent = "Sent to Perfetto (it may ask whether to trust this page). If nothing opens: " + instead;
    }
    window.addEventListener("message", onMessage);
  }

  document.querySelectorAll(".kl-stepline-box").forEach(function (box) {
    if (box.querySelector("script.kl-stepline-data")) { Step(box); }
  });
  document.querySelectorAll("button.kl-perfetto").forEach(function (button) {
    button.addEventListener("click", function () { openPerfetto(button); });
  });
})();
