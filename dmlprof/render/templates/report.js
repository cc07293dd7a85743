// dmlprof report: the sortable, filterable op table and the module tree.
// Names come from the user's model: this script only ever sets textContent, never markup.
(function () {
  "use strict";
  var page = JSON.parse(document.getElementById("dmlprof-data").textContent);
  var fields = page.op_fields;
  var idx = {};
  fields.forEach(function (name, i) { idx[name] = i; });

  function fmtMs(ms) {
    if (ms === null || ms === undefined || isNaN(ms)) return "n/a";  // a prediction has no times
    if (ms >= 1000) return (ms / 1000).toFixed(2) + " s";
    if (ms >= 10) return ms.toFixed(1) + " ms";
    if (ms >= 0.01) return ms.toFixed(3) + " ms";
    return (ms * 1000).toFixed(1) + " us";
  }
  function fmtBytes(n) {
    if (!n) return "";
    var units = ["B", "KiB", "MiB", "GiB"], u = 0;
    while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
    return u === 0 ? n.toFixed(0) + " B" : n.toFixed(1) + " " + units[u];
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // ---- per-op table ---------------------------------------------------------
  var rows = page.ops.map(function (r) {
    var calls = r[idx.calls];
    return {
      op: r[idx.op], verdict: r[idx.verdict], phase: r[idx.phase], calls: calls,
      time_ms: r[idx.time_ms], mean: calls && r[idx.time_ms] !== null ? r[idx.time_ms] / calls : null, share: r[idx.share],
      bytes_moved: r[idx.bytes_moved], fallback_ops: r[idx.fallback_ops], module: r[idx.module],
      source: r[idx.source], node: null
    };
  });
  rows.forEach(function (r) {
    r.haystack = (r.op + " " + r.fallback_ops + " " + r.module + " " + r.source).toLowerCase();
  });

  function buildRow(r) {
    var tr = document.createElement("tr");
    var op = el("td", "name", r.op);
    if (r.fallback_ops && r.fallback_ops !== r.op) op.appendChild(el("div", "small", "\u2192 " + r.fallback_ops.split(",").join(", ")));
    tr.appendChild(op);
    var v = el("td");
    v.appendChild(el("span", "pill " + r.verdict, r.verdict));
    tr.appendChild(v);
    tr.appendChild(el("td", "", r.phase));
    tr.appendChild(el("td", "num", r.calls.toLocaleString("en-US")));
    tr.appendChild(el("td", "num", fmtMs(r.time_ms)));
    tr.appendChild(el("td", "num", fmtMs(r.mean)));
    var share = el("td"), wrap = el("div", "share"), track = el("div", "track"), bar = el("span", "v-" + r.verdict);
    bar.style.width = Math.max(0, Math.min(100, r.share * 100)).toFixed(2) + "%";
    track.appendChild(bar);
    wrap.appendChild(track);
    wrap.appendChild(el("span", "txt", r.share === null ? "n/a" : (r.share * 100).toFixed(1) + "%"));
    share.appendChild(wrap);
    tr.appendChild(share);
    tr.appendChild(el("td", "num", fmtBytes(r.bytes_moved)));
    tr.appendChild(el("td", "name path", r.module));
    tr.appendChild(el("td", "name path", r.source));
    return tr;
  }

  var table = document.getElementById("ops-table");
  if (table) {  // a sweep's page has no op table
    var tbody = table.tBodies[0];
    var filterBox = document.getElementById("ops-filter");
    var verdictBox = document.getElementById("ops-verdict");
    var phaseBox = document.getElementById("ops-phase");
    var countBox = document.getElementById("ops-count");
    var sortKey = "time_ms", sortDir = -1;

    function compare(a, b) {
      var x = a[sortKey], y = b[sortKey];
      if (x < y) return -sortDir;
      if (x > y) return sortDir;
      return b.time_ms - a.time_ms;
    }
    function draw() {
      rows.sort(compare);
      var text = filterBox.value.trim().toLowerCase();
      var verdict = verdictBox.value, phase = phaseBox.value, shown = 0;
      var frag = document.createDocumentFragment();
      rows.forEach(function (r) {
        if (!r.node) r.node = buildRow(r);
        var visible = (!text || r.haystack.indexOf(text) >= 0) && (!verdict || r.verdict === verdict) && (!phase || r.phase === phase);
        r.node.className = visible ? "" : "hidden";
        if (visible) shown++;
        frag.appendChild(r.node);
      });
      tbody.appendChild(frag);
      countBox.textContent = shown + " of " + rows.length + " rows";
    }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      var key = th.getAttribute("data-key");
      if (!key) return;
      th.setAttribute("tabindex", "0");
      function activate() {
        if (sortKey === key) sortDir = -sortDir;
        else { sortKey = key; sortDir = th.getAttribute("data-type") === "num" ? -1 : 1; }
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
        draw();
      }
      th.addEventListener("click", activate);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); activate(); } });
    });
    filterBox.addEventListener("input", draw);
    verdictBox.addEventListener("change", draw);
    phaseBox.addEventListener("change", draw);
    draw();
  }

  // ---- module tree ------------------------------------------------------------
  // Rows are built when their parent is open, so a model with thousands of
  // modules costs only the rows on screen.
  var tree = document.getElementById("module-tree");
  if (tree && page.modules.length) {
    var mi = {};
    page.module_fields.forEach(function (name, i) { mi[name] = i; });
    var nodes = page.modules.map(function (r) {
      return { name: r[mi.module], label: r[mi.label], depth: r[mi.depth], parent: r[mi.parent], calls: r[mi.calls],
               time_ms: r[mi.time_ms], device: r[mi.device_share], fallback: r[mi.fallback_share], cpu: r[mi.cpu_share],
               fallback_calls: r[mi.fallback_calls], fallback_ms: r[mi.fallback_time_ms], open: r[mi.open],
               children: [], row: null, button: null };
    });
    var byModule = {}, roots = [];
    nodes.forEach(function (n) { byModule[n.name] = n; });
    nodes.forEach(function (n) {
      var parent = n.parent ? byModule[n.parent] : null;
      if (parent) parent.children.push(n); else roots.push(n);
    });
    var treeBody = tree.tBodies[0];

    function pct(share) { return (Math.max(0, Math.min(1, share)) * 100).toFixed(3) + "%"; }
    function treeRow(n) {
      var tr = document.createElement("tr");
      var name = el("td", "name");
      name.style.paddingLeft = (8 + n.depth * 18) + "px";
      name.title = n.name;
      if (n.children.length) {
        n.button = el("button", "tw");
        n.button.type = "button";
        n.button.addEventListener("click", function () { n.open = !n.open; drawTree(); });
        name.appendChild(n.button);
      } else {
        name.appendChild(el("span", "leaf"));
      }
      name.appendChild(document.createTextNode(n.label));
      tr.appendChild(name);
      tr.appendChild(el("td", "num", n.calls.toLocaleString("en-US")));
      tr.appendChild(el("td", "num", fmtMs(n.time_ms)));
      var cell = el("td"), wrap = el("div", "share"), track = el("div", "track");
      [["v-device", n.device], ["v-fallback", n.fallback], ["v-cpu", n.cpu]].forEach(function (part) {
        var bar = el("span", part[0]);
        bar.style.width = pct(part[1]);
        track.appendChild(bar);
      });
      wrap.appendChild(track);
      wrap.appendChild(el("span", "txt", (n.device * 100).toFixed(1) + "%"));
      cell.appendChild(wrap);
      tr.appendChild(cell);
      tr.appendChild(el("td", "num", n.fallback_calls ? n.fallback_calls.toLocaleString("en-US") : ""));
      tr.appendChild(el("td", "num", n.fallback_calls ? fmtMs(n.fallback_ms) : ""));
      return tr;
    }
    function drawTree() {
      var frag = document.createDocumentFragment();
      function add(n) {
        if (!n.row) n.row = treeRow(n);
        if (n.button) {
          n.button.textContent = n.open ? "\u25BE" : "\u25B8";
          n.button.setAttribute("aria-expanded", n.open ? "true" : "false");
        }
        frag.appendChild(n.row);
        if (n.open) n.children.forEach(add);
      }
      roots.forEach(add);
      while (treeBody.firstChild) treeBody.removeChild(treeBody.firstChild);
      treeBody.appendChild(frag);
    }
    document.getElementById("tree-open").addEventListener("click", function () { nodes.forEach(function (n) { n.open = true; }); drawTree(); });
    document.getElementById("tree-close").addEventListener("click", function () { nodes.forEach(function (n) { n.open = false; }); drawTree(); });
    drawTree();
  }
  // ---- timeline -----------------------------------------------------------------
  // Every timed call on one canvas, one lane per place it ran. The view is a
  // window [v0, v1] of the run in ns: the wheel zooms around the pointer, a drag
  // pans, a click on a step zooms to it. Hover finds the call under the pointer
  // by binary search in its lane (calls sorted by start), so 100,000 calls stay smooth.
  var line = page.timeline;
  var canvas = document.getElementById("timeline-canvas");
  if (line && canvas) {
    var GUTTER = 74, STEP_H = 18, LANE_H = 36, AXIS_H = 18, PAD = 6;
    var COLORS = ["#2f81f7", "#d1242f", "#9aa4ae"];
    var LABELS = {device: "device", fallback: "fallback", host: "host"};
    var n = line.start_ns.length, total = Math.max(1, line.end_ns);
    var tip = document.getElementById("tl-tip"), box = document.getElementById("tl-box");
    var lanes = line.lanes.map(function () { return []; });
    for (var i = 0; i < n; i++) lanes[line.lane[i]].push(i);
    lanes.forEach(function (calls) { calls.sort(function (a, b) { return line.start_ns[a] - line.start_ns[b]; }); });
    // per lane, the longest call: how far back a call starting before t can still cover t
    var longest = lanes.map(function (calls) {
      return calls.reduce(function (most, i) { return Math.max(most, line.time_ns[i]); }, 0);
    });
    var v0 = 0, v1 = total, drag = null;
    var height = STEP_H + line.lanes.length * LANE_H + AXIS_H + PAD;
    canvas.style.height = height + "px";
    document.getElementById("tl-count").textContent =
      n.toLocaleString("en-US") + " calls, " + line.steps.length + " step" + (line.steps.length === 1 ? "" : "s") + ", " + fmtMs(total / 1e6);

    function plotWidth() { return Math.max(1, canvas.clientWidth - GUTTER - PAD); }
    function xOf(ns) { return GUTTER + (ns - v0) / (v1 - v0) * plotWidth(); }
    function nsAt(x) { return v0 + (x - GUTTER) / plotWidth() * (v1 - v0); }
    function laneTop(lane) { return STEP_H + lane * LANE_H; }

    function drawTimeline() {
      var ratio = window.devicePixelRatio || 1, width = canvas.clientWidth;
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
      var g = canvas.getContext("2d");
      g.setTransform(ratio, 0, 0, ratio, 0, 0);
      g.clearRect(0, 0, width, height);
      g.font = "12px sans-serif";
      g.textBaseline = "middle";
      // steps: alternating bands across every lane, numbered on top
      line.steps.forEach(function (span, k) {
        var a = Math.max(GUTTER, xOf(span.start_ns)), b = Math.min(GUTTER + plotWidth(), xOf(span.end_ns));
        if (b <= a) return;
        g.fillStyle = k % 2 ? "#f6f8fa" : "#eef1f4";
        g.fillRect(a, 0, b - a, height - PAD);
        if (b - a > 46) { g.fillStyle = "#59636e"; g.fillText("step " + span.step, a + 4, STEP_H / 2); }
      });
      var drawn = 0;
      lanes.forEach(function (calls, lane) {
        var top = laneTop(lane) + 4, h = LANE_H - 8;
        g.fillStyle = "#1f2328";
        g.fillText(LABELS[line.lanes[lane]] || line.lanes[lane], 8, top + h / 2);
        g.fillStyle = COLORS[lane] || "#6e7781";
        var lastX = -1;
        for (var j = 0; j < calls.length; j++) {
          var c = calls[j], s = line.start_ns[c], e = s + line.time_ns[c];
          if (e < v0 || s > v1) continue;
          var a = Math.max(GUTTER, xOf(s)), b = Math.min(GUTTER + plotWidth(), xOf(e));
          if (b - a < 1) { if (Math.floor(a) === lastX) continue; b = a + 1; }  // one pixel holds many short calls
          lastX = Math.floor(a);
          g.fillRect(a, top, b - a > 4 ? b - a - 1 : b - a, h);  // a hairline between neighbours wide enough to see
          drawn++;
        }
      });
      g.strokeStyle = "#d8dee4";
      g.beginPath(); g.moveTo(GUTTER - 0.5, 0); g.lineTo(GUTTER - 0.5, height); g.stroke();
      drawAxis(g, laneTop(lanes.length));
      canvas.setAttribute("data-view-start-ns", String(v0));
      canvas.setAttribute("data-view-end-ns", String(v1));
      canvas.setAttribute("data-drawn", String(drawn));
      document.getElementById("tl-range").textContent = "showing " + fmtMs(v0 / 1e6) + " to " + fmtMs(v1 / 1e6) + " of " + fmtMs(total / 1e6);
    }

    function drawAxis(g, y) {
      // about one tick per 120 px, at a round step (1, 2 or 5 x 10^k ns)
      var want = (v1 - v0) / Math.max(1, plotWidth() / 120), step = Math.pow(10, Math.floor(Math.log10(want)));
      step *= want / step > 5 ? 10 : want / step > 2 ? 5 : want / step > 1 ? 2 : 1;
      g.fillStyle = "#59636e"; g.strokeStyle = "#8c959f"; g.textAlign = "center";
      for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
        var x = xOf(t);
        g.beginPath(); g.moveTo(x + 0.5, y); g.lineTo(x + 0.5, y + 4); g.stroke();
        g.fillText(fmtMs(t / 1e6), x, y + 11);
      }
      g.textAlign = "start";
    }

    function setView(a, b) {
      var span = Math.max(1000, b - a);  // no closer than 1 us across the plot
      a = Math.max(0, Math.min(a, total - span));
      v0 = a; v1 = Math.min(total, a + span);
      if (v1 - v0 < span) v0 = Math.max(0, v1 - span);
      drawTimeline();
    }
    function zoom(factor, atX) {
      var at = atX === undefined ? (v0 + v1) / 2 : nsAt(atX);
      setView(at - (at - v0) * factor, at + (v1 - at) * factor);
    }

    function callAt(x, y) {
      var lane = Math.floor((y - STEP_H) / LANE_H);
      if (lane < 0 || lane >= lanes.length || x < GUTTER) return null;
      var calls = lanes[lane], t = nsAt(x), slack = 3 / plotWidth() * (v1 - v0);
      var lo = 0, hi = calls.length;  // first call starting after t + slack
      while (lo < hi) { var mid = (lo + hi) >> 1; if (line.start_ns[calls[mid]] <= t + slack) lo = mid + 1; else hi = mid; }
      var best = null, bestGap = Infinity;
      for (var j = lo - 1; j >= 0; j--) {
        var c = calls[j], s = line.start_ns[c], e = s + line.time_ns[c];
        if (s < t - slack - longest[lane]) break;
        var gap = t < s ? s - t : t > e ? t - e : 0;
        if (gap < bestGap || (gap === bestGap && gap === 0)) { best = c; bestGap = gap; if (gap === 0) break; }
      }
      return bestGap <= slack ? best : null;
    }
    function name(k) { return line.names[k] || ""; }
    function showTip(c, x, y) {
      if (c === null) { tip.hidden = true; return; }
      tip.textContent = name(line.op[c]) + "\n" + line.lanes[line.lane[c]] + " \u00b7 " + fmtMs(line.time_ns[c] / 1e6) +
        " \u00b7 step " + line.step[c] + " \u00b7 " + name(line.phase[c]) +
        (name(line.module[c]) ? "\nmodule " + name(line.module[c]) : "") + (name(line.source[c]) ? "\n" + name(line.source[c]) : "");
      tip.hidden = false;
      var left = Math.min(x + 14, box.clientWidth - tip.offsetWidth - 4);
      tip.style.left = Math.max(4, left) + "px";
      tip.style.top = (y + 16) + "px";
    }
    function point(e) { var r = canvas.getBoundingClientRect(); return {x: e.clientX - r.left, y: e.clientY - r.top}; }

    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      zoom(e.deltaY > 0 ? 1.25 : 0.8, point(e).x);
    }, {passive: false});
    canvas.addEventListener("mousedown", function (e) {
      drag = {x: point(e).x, v0: v0, v1: v1, moved: false};
      canvas.classList.add("dragging");
    });
    window.addEventListener("mouseup", function (e) {
      if (!drag) return;
      var p = point(e), wasClick = !drag.moved;
      drag = null;
      canvas.classList.remove("dragging");
      if (wasClick && p.y < STEP_H) {  // a click on the step row zooms to that step
        var t = nsAt(p.x);
        line.steps.forEach(function (span) { if (t >= span.start_ns && t <= span.end_ns) setView(span.start_ns, span.end_ns); });
      }
    });
    canvas.addEventListener("mousemove", function (e) {
      var p = point(e);
      if (drag) {
        var dx = p.x - drag.x;
        if (Math.abs(dx) > 2) drag.moved = true;
        var shift = dx / plotWidth() * (drag.v1 - drag.v0);
        setView(drag.v0 - shift, drag.v1 - shift);
        tip.hidden = true;
        return;
      }
      showTip(callAt(p.x, p.y), p.x, p.y);
    });
    canvas.addEventListener("mouseleave", function () { tip.hidden = true; });
    document.getElementById("tl-in").addEventListener("click", function () { zoom(0.5); });
    document.getElementById("tl-out").addEventListener("click", function () { zoom(2); });
    document.getElementById("tl-reset").addEventListener("click", function () { setView(0, total); });
    window.addEventListener("resize", drawTimeline);
    drawTimeline();
  }
})();
