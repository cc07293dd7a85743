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
})();
