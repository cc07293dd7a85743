// dmlprof report: the sortable, filterable op table and the module tree.
// Names come from the user's model: this script only ever sets textContent, never markup.
(function () {
  "use strict";
  var page = JSON.parse(document.getElementById("dmlprof-data").textContent);
  var fields = page.op_fields;
  var idx = {};
  fields.forEach(function (name, i) { idx[name] = i; });

  function fmtMs(ms) {
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
      time_ms: r[idx.time_ms], mean: calls ? r[idx.time_ms] / calls : 0, share: r[idx.share],
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
    wrap.appendChild(el("span", "txt", (r.share * 100).toFixed(1) + "%"));
    share.appendChild(wrap);
    tr.appendChild(share);
    tr.appendChild(el("td", "num", fmtBytes(r.bytes_moved)));
    tr.appendChild(el("td", "name path", r.module));
    tr.appendChild(el("td", "name path", r.source));
    return tr;
  }

  var table = document.getElementById("ops-table");
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

  // ---- module tree ------------------------------------------------------------
  var tree = document.getElementById("module-tree");
  if (tree) {
    var byName = {};
    var treeRows = Array.prototype.slice.call(tree.tBodies[0].rows);
    treeRows.forEach(function (tr) { byName[tr.getAttribute("data-module")] = tr; });
    function visible(tr) {
      var parent = byName[tr.getAttribute("data-parent")];
      while (parent) {
        if (parent.getAttribute("data-open") !== "true") return false;
        parent = byName[parent.getAttribute("data-parent")];
      }
      return true;
    }
    function setOpen(tr, open) {
      tr.setAttribute("data-open", open ? "true" : "false");
      var button = tr.querySelector("button.tw");
      if (button) {
        button.textContent = open ? "\u25BE" : "\u25B8";
        button.setAttribute("aria-expanded", open ? "true" : "false");
      }
    }
    function refresh() {
      treeRows.forEach(function (tr) { tr.className = visible(tr) ? "" : "hidden"; });
    }
    treeRows.forEach(function (tr) {
      var button = tr.querySelector("button.tw");
      if (button) button.addEventListener("click", function () {
        setOpen(tr, tr.getAttribute("data-open") !== "true");
        refresh();
      });
    });
    document.getElementById("tree-open").addEventListener("click", function () { treeRows.forEach(function (tr) { setOpen(tr, true); }); refresh(); });
    document.getElementById("tree-close").addEventListener("click", function () { treeRows.forEach(function (tr) { setOpen(tr, false); }); refresh(); });
    refresh();
  }
})();
