(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("entries-data").textContent);
  var body = document.querySelector("#entries-table tbody");
  var search = document.getElementById("search");
  var result = document.getElementById("result-filter");
  var count = document.getElementById("entries-count");
  var resultColumn = data.columns.indexOf(data.result_column);
  var nameColumn = data.columns.indexOf(data.name_column);
  var LIMIT = 500;

  function matches(row, words, wanted) {
    if (wanted && String(row[resultColumn]).toLowerCase() !== wanted) return false;
    var text = row.join(" ").toLowerCase();
    return words.every(function (w) { return text.indexOf(w) >= 0; });
  }

  function cell(text) {
    var td = document.createElement("td");
    td.textContent = text;
    return td;
  }

  function render() {
    var words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    var wanted = result.value;
    var shown = 0, total = 0;
    var fragment = document.createDocumentFragment();
    data.rows.forEach(function (row, i) {
      if (!matches(row, words, wanted)) return;
      total += 1;
      if (shown >= LIMIT) return;
      shown += 1;
      var tr = document.createElement("tr");
      tr.className = String(row[resultColumn]).toLowerCase() === "true" ? "error" : String(row[resultColumn]).toLowerCase();
      row.forEach(function (value, j) {
        var td = tr.appendChild(cell(value));
        if (j === nameColumn) td.className = "name";
      });
      var origin = data.origins[i], td = document.createElement("td");
      var file = data.files[origin[0]];
      var label = "row " + origin[1];
      if (file) {
        var a = document.createElement("a");
        a.href = file; a.textContent = label; a.title = decodeURIComponent(file.split("/").pop());
        td.appendChild(a);
      }
      else { td.textContent = label; }
      tr.appendChild(td);
      fragment.appendChild(tr);
    });
    body.replaceChildren(fragment);
    count.textContent = total + " of " + data.rows.length + " rows match" + (total > shown ? "; the first " + shown + " shown" : "") +
      (data.left_out ? "; " + data.left_out + " passing rows are only in the result files" : "");
  }

  document.querySelectorAll("[data-entry]").forEach(function (el) {
    el.addEventListener("click", function (event) {
      event.preventDefault();
      search.value = el.getAttribute("data-entry");
      render();
      document.getElementById("entries").scrollIntoView();
    });
  });
  if (location.hash.indexOf("#q=") === 0) search.value = decodeURIComponent(location.hash.slice(3));
  search.addEventListener("input", render);
  result.addEventListener("change", render);
  render();
})();
