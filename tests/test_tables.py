"""shardbook.tables: one Table, shown as HTML on a page and as aligned text in a terminal."""

import numpy as np
import pytest

import shardbook
from shardbook.comms import format_bytes
from shardbook.tables import Table


def _layouts():
    t = Table(
        ["layout", "peak", "sent GiB", "fits"],
        formats={"peak": format_bytes, "sent GiB": ".2f"},
        caption="8 devices",
        notes=["peaks from memory_analysis()"],
    )
    t.add("data parallel", 21 * 2**30, 1.5, "no")
    t.add("FSDP", 6 * 2**30, np.float32(2.25), "yes")
    return t


def test_table_text_form():
    # property: print(table) reads in a terminal: caption, header, a rule, rows, notes; numbers right
    assert str(_layouts()).splitlines() == [
        "8 devices",
        "layout           peak  sent GiB  fits",
        "-------------  ------  --------  ----",
        "data parallel  21 GiB      1.50  no",
        "FSDP            6 GiB      2.25  yes",
        "peaks from memory_analysis()",
    ]
    assert repr(_layouts()) == str(_layouts())


def test_table_repr_pretty_is_the_text():
    # property: IPython's plain-text display (a terminal, a text/plain output) shows the same text
    from IPython.lib.pretty import pretty

    assert pretty(_layouts()) == str(_layouts())


def test_table_html_has_header_and_alignment():
    # property: the HTML is a real table: a header row, numbers right-aligned, text left-aligned,
    # inside the box the book's CSS wraps and scrolls (class sb-table)
    page = _layouts()._repr_html_()
    assert page.startswith("<div class='sb-table'><table><caption>8 devices</caption><thead><tr>")
    assert "<th style='text-align:left'>layout</th>" in page
    assert "<th class='sb-num' style='text-align:right'>peak</th>" in page
    assert "<td class='sb-num' style='text-align:right'>21 GiB</td>" in page
    assert "<td style='text-align:left'>yes</td>" in page
    assert page.count("<tr>") == 3
    assert page.endswith("<p class='sb-table-note'>peaks from memory_analysis()</p>")


def test_table_html_escapes_cells():
    # property: <, > and & in a name, a value or a note are shown, never read as markup
    t = Table(["a<b", "x & y"], notes=["<script>"])
    t.add("f32[8]<-X", "P('X') & <Y>")
    page = t._repr_html_()
    assert "a&lt;b" in page and "x &amp; y" in page
    assert "f32[8]&lt;-X" in page and "P(&#x27;X&#x27;) &amp; &lt;Y&gt;" in page
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_table_alignment_by_column():
    # property: a column is right-aligned when all its values are numbers (None, an empty cell, does
    # not count; booleans are words), unless align says otherwise
    t = Table(["name", "n", "ok", "maybe"], align={"name": "right"})
    t.add("a", 1, True, None)
    t.add("b", 2.5, False, 3)
    assert t._alignments() == ["right", "right", "left", "right"]
    assert str(t).splitlines()[2] == "   a    1  True"


def test_table_values_stay_numbers():
    # property: assertions read the values, not the text the table shows
    assert _layouts().column("sent GiB") == [1.5, np.float32(2.25)]
    assert _layouts().cells()[1][2] == "2.25"


def test_table_rejects_bad_rows_and_columns():
    # property: a mistake names the bad value
    t = Table(["a", "b"])
    with pytest.raises(ValueError, match=r"expected 2 values \(a, b\), got 1"):
        t.add(1)
    with pytest.raises(ValueError, match="unknown column 'c'"):
        Table(["a"], formats={"c": ".2f"})
    with pytest.raises(ValueError, match="expected align 'left' or 'right', got 'centre'"):
        Table(["a"], align={"a": "centre"})
    with pytest.raises(ValueError, match="unknown column 'z'"):
        t.column("z")


def test_table_is_exported_flat():
    # property: chapters spell it shardbook.Table
    assert shardbook.Table is Table


def _wide_layouts(narrow=("model", "layout", "verdict", "v5e ms")):
    t = Table(["model", "layout", "verdict", "v5e ms", "peak GiB", "sent GiB", "CPU peak GiB"], narrow=narrow)
    t.add("1.4B", "pipeline 1F1B", "does not fit (needs 21.14 GiB)", None, 21.14, None, 30.5)
    t.add("0.16B", "data parallel", "fits, wins", 123.4, 3.21, 0.62, 4.4)
    return t


def test_table_narrow_marks_the_columns_a_phone_hides():
    # property: narrow= marks every other column's cells sb-wide and adds a line naming them, hidden
    # inline (a notebook without the book's CSS shows every column and no such line)
    page = _wide_layouts()._repr_html_()
    assert "<th class='sb-num sb-wide' style='text-align:right'>CPU peak GiB</th>" in page
    assert "<td class='sb-num sb-wide' style='text-align:right'>30.5</td>" in page
    assert "<th style='text-align:left'>verdict</th>" in page
    assert page.count("sb-wide") == 3 * 3  # 3 hidden columns: a header and two cells each
    assert (
        "<p class='sb-table-note sb-narrow-note' style='display:none'>on a narrow screen 3 of 7 columns "
        "are hidden (peak GiB, sent GiB, CPU peak GiB)" in page
    )
    assert "sb-wide" not in _layouts()._repr_html_() and "sb-narrow-note" not in _layouts()._repr_html_()
    with pytest.raises(ValueError, match="unknown column 'speed'"):
        Table(["a"], narrow=["speed"])


def test_table_narrow_reads_on_a_phone(tmp_path):
    # property: with the book's CSS, at 390 px the named columns lie inside the screen and the others
    # are hidden, with the line saying so; at 1280 px every column shows and the line does not
    from pathlib import Path

    from tests.pages import at_both_widths

    css = Path(__file__).resolve().parents[1] / "_static" / "shardbook.css"
    page_path = tmp_path / "table.html"
    page_path.write_text(
        "<!doctype html><html><head><meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<link rel='stylesheet' href='{css.as_uri()}'></head><body><article class='bd-article'>"
        f"<div class='cell_output'><div class='output text_html'>{_wide_layouts()._repr_html_()}</div></div>"
        "</article></body></html>"
    )
    facts_js = """() => Array.from(document.querySelectorAll('th')).map(th => {
        const r = th.getBoundingClientRect();
        return [th.textContent, getComputedStyle(th).display !== 'none', r.right];
      })"""

    def check(page, viewport, width):
        heads = page.evaluate(facts_js)
        note = page.locator(".sb-narrow-note")
        if viewport == "phone":
            shown = [name for name, visible, _ in heads if visible]
            assert shown == ["model", "layout", "verdict", "v5e ms"], heads
            assert all(right <= width for _, visible, right in heads if visible), heads
            assert note.is_visible()
        else:
            assert all(visible and right <= width for _, visible, right in heads), heads
            assert not note.is_visible()

    at_both_widths(page_path, check)
