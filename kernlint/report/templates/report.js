// Sortable tables: click a header with data-sort="num" or "text"; a second click reverses the order.
(function () {
  function key(cell, numeric) {
    var v = cell.getAttribute("data-value");
    if (v === null) { v = cell.textContent.trim(); }
    if (numeric) { var n = parseFloat(v); return isNaN(n) ? -Infinity : n; }
    return v.toLowerCase();
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var headers = table.querySelectorAll("th[data-sort]");
    headers.forEach(function (th, column) {
      th.addEventListener("click", function () {
        var numeric = th.getAttribute("data-sort") === "num";
        var descending = !th.classList.contains("sorted-desc");
        headers.forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(descending ? "sorted-desc" : "sorted-asc");
        var index = Array.prototype.indexOf.call(th.parentNode.children, th);
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[index], numeric), y = key(b.cells[index], numeric);
          var order = x < y ? -1 : x > y ? 1 : 0;
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
