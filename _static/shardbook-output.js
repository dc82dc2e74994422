// Readable cell output. Printed text that looks like a table (two or more lines with columns lined up
// by runs of spaces, or box-drawing characters) keeps its lines and scrolls sideways; every other
// printed block (messages, errors) wraps, so no part of a long error hides past the right edge.
// Anything that scrolls sideways (code, tables, figures, HTML outputs such as a report's table) gets the
// class `sb-scrollable`, which _static/shardbook.css draws as a visible scrollbar and a shadow on the side
// with more to see.
(function () {
  var TABULAR = /\S {2,}\S|[│┃|┆]/;
  var PHONE = window.matchMedia("(max-width: 699.98px)"); // as in shardbook.css

  function looksTabular(text) {
    var lines = text.split("\n");
    var hits = 0;
    for (var i = 0; i < lines.length; i++) {
      if (TABULAR.test(lines[i].trim())) hits++;
      if (hits >= 2) return true;
    }
    return false;
  }

  function markOutputs() {
    document.querySelectorAll(".cell_output .output pre, .cell_output pre").forEach(function (pre) {
      var output = pre.closest(".output");
      var isError = output && /traceback|stderr|error/.test(output.className);
      if (isError || !looksTabular(pre.textContent)) pre.classList.add("sb-wrap");
    });
  }

  // The shadow is drawn by a frame around the scrolling box: inside the box it would scroll with the
  // content, and table cells would paint over it.
  function frameOf(box) {
    var parent = box.parentElement;
    if (parent && parent.classList.contains("sb-scroll-frame")) return parent;
    var frame = document.createElement("div");
    frame.className = "sb-scroll-frame";
    box.parentNode.insertBefore(frame, box);
    frame.appendChild(box);
    return frame;
  }

  function updateCue(box) {
    var more = box.scrollWidth - box.clientWidth;
    box.classList.toggle("sb-scrollable", more > 1);
    if (more <= 1 && !(box.parentElement && box.parentElement.classList.contains("sb-scroll-frame"))) return;
    var frame = frameOf(box);
    frame.classList.toggle("sb-more-right", more > 1 && box.scrollLeft < more - 1);
    frame.classList.toggle("sb-more-left", more > 1 && box.scrollLeft > 1);
  }

  function markScrollables() {
    var boxes = document.querySelectorAll(
      "div.highlight pre, .cell_output pre, .pst-scrollable-table-container, .table-wrapper, .sb-figure-scroll," +
        " .cell_output .output.text_html"
    );
    boxes.forEach(function (box) {
      updateCue(box);
      if (!box.dataset.sbCue) {
        box.dataset.sbCue = "1";
        box.addEventListener("scroll", function () { updateCue(box); }, { passive: true });
        if (resized) resized.observe(box);
      }
    });
  }
  // Content drawn after the page loaded changes a box's size: a treescope tree (`nnx.display`) is drawn
  // only when the reader comes near it. The box then gets its cue as it grows.
  var resized = window.ResizeObserver
    ? new ResizeObserver(function (entries) {
        entries.forEach(function (entry) { updateCue(entry.target); });
      })
    : null;

  // Each output image sits in its own box: on a phone (shardbook.css) the figure fits the column, and a
  // tap shows it at the width it was drawn at in that box, which then scrolls sideways. A figure with a
  // phone image (a <picture>, tools/phone_figures.py) is drawn for the phone's column: no tap needed.
  function boxFigures() {
    var zoomable = 0;
    document.querySelectorAll(".cell_output img").forEach(function (img) {
      var figure = img.parentElement && img.parentElement.tagName === "PICTURE" ? img.parentElement : img;
      var parent = figure.parentElement;
      if (parent && parent.classList.contains("sb-figure-scroll")) return;
      var box = document.createElement("div");
      box.className = "sb-figure-scroll";
      figure.parentNode.insertBefore(box, figure);
      box.appendChild(figure);
      img.addEventListener("load", markScrollables);
      if (figure !== img) return;
      zoomable++;
      box.classList.add("sb-zoomable");
      // A tap switches between the whole figure in the column and the figure at the size it was drawn
      // (legible labels; the box then scrolls sideways). Only on a phone does the second differ.
      img.addEventListener("click", function () {
        remember("sb-tapped");
        document.querySelectorAll(".sb-tap-hint").forEach(function (hint) { hint.remove(); });
        box.classList.toggle("sb-zoomed");
        if (PHONE.matches) img.title = box.classList.contains("sb-zoomed") ? "Tap to fit" : "Tap for full size";
        box.scrollLeft = 0;
        markScrollables();
      });
      if (PHONE.matches) img.title = "Tap for full size";
    });
    // Said once, under a page's first figure that a tap enlarges, on a phone, until the reader has tapped one.
    var first = document.querySelector(".cell_output .sb-figure-scroll.sb-zoomable");
    if (zoomable && first && PHONE.matches && !recalled("sb-tapped") && !document.querySelector(".sb-tap-hint")) {
      var hint = document.createElement("p");
      hint.className = "sb-tap-hint";
      hint.textContent = "Tap a figure to see it at full size; tap again to fit it.";
      first.parentNode.insertBefore(hint, first.nextSibling);
    }
  }

  function remember(key) {
    try { window.localStorage.setItem(key, "1"); } catch (e) { /* private mode: say it again */ }
  }
  function recalled(key) {
    try { return window.localStorage.getItem(key) === "1"; } catch (e) { return false; }
  }

  // A table with class sb-stacked (a MyST list-table's :class:) becomes, on a phone, one block per row:
  // each cell under its column's name (shardbook.css), so no column hides past the screen's edge.
  function labelStackedTables() {
    document.querySelectorAll("table.sb-stacked").forEach(function (table) {
      var names = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
        return th.textContent.trim();
      });
      table.querySelectorAll("tbody tr").forEach(function (row) {
        Array.prototype.forEach.call(row.children, function (cell, i) {
          if (names[i]) cell.setAttribute("data-label", names[i]);
        });
      });
    });
  }

  // Each line of a code block in a span (shardbook.css, phones): a wrapped line's continuation is
  // indented past the line's own indentation. Pygments' token spans are flat; one that holds a line
  // break (a docstring) is closed at the end of a line and opened again on the next. The text is
  // unchanged, line breaks included, so copying the code copies what it was.
  function markCodeLines() {
    document.querySelectorAll("div.highlight pre").forEach(function (pre) {
      if (pre.dataset.sbLines || pre.closest(".cell_output")) return;  // printed output keeps its lines
      pre.dataset.sbLines = "1";
      var lines = pre.innerHTML.split("\n");
      if (lines.length && lines[lines.length - 1] === "") lines.pop();
      var open = [];
      pre.innerHTML = lines.map(function (line) {
        var before = open.join("");
        var tag = /<(\/?)span([^>]*)>/g;
        var m;
        while ((m = tag.exec(line))) {
          if (m[1]) open.pop();
          else open.push("<span" + m[2] + ">");
        }
        var after = open.map(function () { return "</span>"; }).join("");
        var text = (before + line).replace(/<[^>]*>/g, "");
        var indent = text.match(/^ */)[0].length;
        return '<span class="sb-line" style="--sb-indent: ' + indent + '">' + before + line + after +
          "\n</span>";
      }).join("");
    });
  }

  function setup() {
    markCodeLines();
    labelStackedTables();
    markOutputs();
    boxFigures();
    markScrollables();
    window.addEventListener("resize", markScrollables);
    window.addEventListener("load", markScrollables);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
