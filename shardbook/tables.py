"""Results as tables: :class:`Table`, rows of values under named columns.

A chapter fills a ``Table`` with the values it measured and shows it as a cell's last expression (or
with ``display``): a notebook and the book's pages show an HTML ``<table>`` that wraps its cells to
the column and scrolls inside its own box when it must (``_static/shardbook.css``, class
``sb-table``); ``print(table)``, a terminal and a plain-text output show the same rows as aligned
text. The values stay numbers: assertions read them from ``table.column(name)`` or from the data
the rows were made from, never from the text.

Numbers are right-aligned, text left-aligned; the first column is the one the prose reads first. A
table too wide for a phone names the columns a phone shows (``narrow=``): below 700 px the page hides
the others and says which, so that the deciding columns are on the screen, not scrolled off it; a
notebook without the book's styles shows every column.
"""

from __future__ import annotations

import html
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Format = str | Callable[[Any], str]


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


class Table:
    """Rows of values under named columns, shown as an HTML table in a notebook and as text elsewhere.

    Args:
      columns: the column names, the one the prose reads first first.
      rows: the rows so far, each a sequence of one value per column (``add`` appends more).
      formats: how a column's values are written: a format spec (``","``, ``".2e"``) or a function
        of the value (``format_bytes``). ``None`` is written as an empty cell, a string as itself.
      align: ``"left"`` or ``"right"`` for a column, overriding the default (right when every value
        of the column is a number, else left).
      caption: a line above the table.
      notes: lines under the table.
      narrow: the columns a narrow screen (a phone, below 700 px) shows, in the table's order; the
        others are hidden there, with a line naming them. Empty: every column everywhere.
      source: where every TPU figure of the table comes from: an object that knows it (an Estimate,
        a TpuProgram, a record entry; :func:`shardbook.sources.source_of`), whose tag ends the
        caption. A table whose rows come from several sources gives each row its tag in a column
        instead (``tag(obj)``).

    Raises:
      ValueError: a row whose length is not the number of columns, an unknown column in ``formats``
        or ``align``, or an alignment other than "left" and "right".

    Example:
      >>> t = Table(["layout", "peak GiB", "fits"], formats={"peak GiB": ".2f"})
      >>> t.add("data parallel", 21.14, "no")
      >>> t.add("FSDP", 6.15, "yes")
      >>> print(t)
      layout         peak GiB  fits
      -------------  --------  ----
      data parallel     21.14  no
      FSDP               6.15  yes
      >>> t.column("peak GiB")
      [21.14, 6.15]
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]] = (),
        *,
        formats: Mapping[str, Format] | None = None,
        align: Mapping[str, str] | None = None,
        caption: str = "",
        notes: Sequence[str] = (),
        narrow: Sequence[str] = (),
        source: Any = None,
    ) -> None:
        self.columns = [str(c) for c in columns]
        self.formats = dict(formats or {})
        self.align = dict(align or {})
        self.narrow = [str(c) for c in narrow]
        for name in [*self.formats, *self.align, *self.narrow]:
            if name not in self.columns:
                raise ValueError(f"unknown column {name!r}: expected one of {self.columns}")
        for name, side in self.align.items():
            if side not in ("left", "right"):
                raise ValueError(f"column {name!r}: expected align 'left' or 'right', got {side!r}")
        if source is not None:
            from .sources import tag

            caption = f"{caption} ({tag(source)})" if caption else f"source: {tag(source)}"
        self.caption = caption
        self.notes = list(notes)
        self.rows: list[list[Any]] = []
        for row in rows:
            self.add(*row)

    def add(self, *values: Any) -> None:
        """Appends one row: one value per column, in the columns' order."""
        if len(values) != len(self.columns):
            raise ValueError(
                f"expected {len(self.columns)} values ({', '.join(self.columns)}), got {len(values)}: "
                f"{values!r}"
            )
        self.rows.append(list(values))

    def column(self, name: str) -> list[Any]:
        """The values of one column, as they were added (numbers stay numbers)."""
        if name not in self.columns:
            raise ValueError(f"unknown column {name!r}: expected one of {self.columns}")
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def _alignments(self) -> list[str]:
        sides = []
        for i, name in enumerate(self.columns):
            values = [row[i] for row in self.rows if row[i] is not None]
            numeric = bool(values) and all(_is_number(v) for v in values)
            sides.append(self.align.get(name, "right" if numeric else "left"))
        return sides

    def _cell(self, name: str, value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        fmt = self.formats.get(name)
        if fmt is None:
            return str(value)
        return fmt(value) if callable(fmt) else format(value, fmt)

    def cells(self) -> list[list[str]]:
        """The rows as the text each cell shows."""
        return [[self._cell(n, v) for n, v in zip(self.columns, row, strict=True)] for row in self.rows]

    def __str__(self) -> str:
        cells = self.cells()
        widths = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(self.columns)]
        sides = self._alignments()

        def line(texts: Sequence[str]) -> str:
            parts = [
                t.rjust(w) if s == "right" else t.ljust(w)
                for t, w, s in zip(texts, widths, sides, strict=True)
            ]
            return "  ".join(parts).rstrip()

        lines = [self.caption] if self.caption else []
        lines += [line(self.columns), "  ".join("-" * w for w in widths)]
        lines += [line(r) for r in cells]
        lines += self.notes
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        # The class styles it on the book's pages; the inline text-align keeps numbers right-aligned
        # and text left-aligned where only a notebook's own styles apply (Colab, JupyterLab).
        sides = self._alignments()

        # a column a phone does not show is marked sb-wide (hidden below 700 px by the book's CSS)
        wide = [bool(self.narrow) and n not in self.narrow for n in self.columns]

        def td(tag: str, text: str, side: str, hidden: bool) -> str:
            classes = " ".join(c for c, on in (("sb-num", side == "right"), ("sb-wide", hidden)) if on)
            cls = f" class='{classes}'" if classes else ""
            return f"<{tag}{cls} style='text-align:{side}'>{html.escape(text)}</{tag}>"

        head = "".join(td("th", n, s, h) for n, s, h in zip(self.columns, sides, wide, strict=True))
        body = "".join(
            "<tr>" + "".join(td("td", t, s, h) for t, s, h in zip(r, sides, wide, strict=True)) + "</tr>"
            for r in self.cells()
        )
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        notes = "".join(f"<p class='sb-table-note'>{html.escape(n)}</p>" for n in self.notes)
        hidden = [n for n, h in zip(self.columns, wide, strict=True) if h]
        if hidden:  # shown only where the columns are hidden: inline display:none, the CSS overrides
            names = ", ".join(hidden)
            notes += (
                f"<p class='sb-table-note sb-narrow-note' style='display:none'>on a narrow screen "
                f"{len(hidden)} of {len(self.columns)} columns are hidden ({html.escape(names)}): "
                "turn the phone or widen the window to see them</p>"
            )
        return (
            f"<div class='sb-table'><table>{caption}<thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>{notes}"
        )
