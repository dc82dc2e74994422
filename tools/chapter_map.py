"""The landing page's picture: the chapters, what each needs first, and about how long each takes.

python tools/chapter_map.py           write _static/chapter-map.svg and _static/chapter-map-phone.svg
python tools/chapter_map.py --check   fail if the committed pictures differ from a fresh drawing

The picture is plain SVG written here (no plotting library, no fonts to fetch): one box per chapter,
an arrow from each chapter to those that build on it; on a phone (book/intro.md picks it with a
<picture> element) one column of boxes, each naming the chapters it needs, so that its text is as
large as the page's. A chapter's minutes are estimated from its
source: its prose read at 150 words a minute and its code at 20 lines a minute (reading a cell and
its output), rounded to 5 minutes. The same minutes appear in book/intro.md's table
(`test_intro_states_the_minutes_of_the_picture` holds the two together).
"""

from __future__ import annotations

import argparse
import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"wide": ROOT / "_static" / "chapter-map.svg", "phone": ROOT / "_static" / "chapter-map-phone.svg"}

# number: (short title, source stem, kind, (column, row))
CHAPTERS = {
    0: ("JAX for PyTorch users", "00_jax_for_pytorch_users", "start", (0, 0)),
    1: ("Meshes and shardings", "01_devices_meshes_shardings", "start", (1, 0)),
    2: ("Auto sharding", "02_auto_sharding", "modes", (1, 1)),
    3: ("Explicit sharding", "03_explicit_sharding", "modes", (1, 2)),
    10: ("Memory", "10_memory", "side", (2, 2)),
    12: ("Many hosts", "12_many_hosts", "side", (0, 3)),
    4: ("Manual sharding", "04_manual_sharding", "modes", (1, 3)),
    5: ("Collective matmul", "05_collective_matmul", "technique", (0, 4)),
    6: ("Mixture of experts", "06_moe_routing", "technique", (1, 4)),
    7: ("Autodiff and sharding", "07_autodiff_sharding", "technique", (2, 4)),
    11: ("Train a transformer", "11_training_a_transformer", "capstone", (1, 5)),
    8: ("First-class VJPs", "08_vjp_objects", "technique", (2, 5)),
    9: ("Matmul precision", "09_precision_and_compiler_control", "side", (0, 5)),
}
# (from, to): chapter `to` builds on chapter `from`; chapter 0 is for readers new to JAX only.
NEEDS = [(0, 1), (1, 2), (2, 3), (2, 10), (3, 4), (3, 12), (4, 5), (4, 6), (4, 7), (7, 8)]
NEEDS += [(7, 9), (8, 11), (10, 11)]  # 9: custom_vjp needs 7 (and 3, through 4)
OPTIONAL = {(0, 1)}
COLOURS = {  # fill, border
    "start": ("#e8eef9", "#3b5b9a"),
    "modes": ("#dbe9f6", "#1f5f9e"),
    "technique": ("#e3f2e1", "#2e7d32"),
    "side": ("#f1e8f6", "#7b3f98"),
    "capstone": ("#fdebd8", "#b35900"),
}
LEGEND = [
    ("start", "start"),
    ("modes", "three modes"),
    ("technique", "techniques"),
    ("side", "own topics"),
    ("capstone", "all together"),
]

BOX_W, BOX_H, COL, ROW, MARGIN, TOP = 226, 50, 246, 72, 12, 12
WIDTH = MARGIN * 2 + COL * 2 + BOX_W + 26  # the last 26: the lane that takes 10 -> 11 down the side


def minutes(stem: str) -> int:
    """About how long a chapter takes to read with its cells run, from its source, in minutes."""
    import jupytext

    nb = jupytext.read(ROOT / "book" / f"{stem}.md", fmt="md:myst")
    words = sum(len(c.source.split()) for c in nb.cells if c.cell_type == "markdown")
    lines = sum(len(c.source.splitlines()) for c in nb.cells if c.cell_type == "code")
    return max(5, 5 * round((words / 150 + lines / 20) / 5))


def _box(n: int) -> tuple[float, float]:
    col, row = CHAPTERS[n][3]
    return MARGIN + col * COL, TOP + row * ROW


def _arrow(a: int, b: int) -> str:
    (ax, ay), (bx, by) = _box(a), _box(b)
    dash = ' stroke-dasharray="5 4"' if (a, b) in OPTIONAL else ""
    if ay == by:  # side by side: from the nearer side
        x1, x2 = (ax + BOX_W, bx) if bx > ax else (ax, bx + BOX_W)
        y = ay + BOX_H / 2
        return f'<path d="M{x1:g},{y:g} L{x2:g},{y:g}"{dash} class="e"/>'
    if (a, b) == (10, 11):  # down the right-hand lane, under chapter 8, up into 11
        lane, below = WIDTH - MARGIN - 8, by + BOX_H + 12
        x0, y0 = ax + BOX_W, ay + BOX_H / 2
        tx = bx + BOX_W / 2 + 40
        return (
            f'<path d="M{x0:g},{y0:g} L{lane:g},{y0:g} L{lane:g},{below:g} L{tx:g},{below:g} '
            f'L{tx:g},{by + BOX_H:g}" class="e"/>'
        )
    x1, y1 = ax + BOX_W / 2, ay + BOX_H
    x2, y2 = bx + BOX_W / 2, by
    mid = (y1 + y2) / 2
    return f'<path d="M{x1:g},{y1:g} C{x1:g},{mid:g} {x2:g},{mid:g} {x2:g},{y2:g}"{dash} class="e"/>'


def draw() -> str:
    """The picture as SVG text."""
    rows = max(row for *_, (_, row) in CHAPTERS.values()) + 1
    legend_y = TOP + rows * ROW + 14
    height = legend_y + 22
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" role="img" aria-labelledby="map-title map-desc" '
        'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif">',
        '<title id="map-title">The chapters and what each needs first</title>',
        '<desc id="map-desc">'
        + escape(
            "; ".join(
                f"chapter {b} ({CHAPTERS[b][0]}) after chapter {a}"
                + (" if new to JAX" if (a, b) in OPTIONAL else "")
                for a, b in NEEDS
            )
        )
        + ".</desc>",
        '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>'
        "<style>.e{fill:none;stroke:#555;stroke-width:1.6;marker-end:url(#head)}"
        ".t{font-size:14px;font-weight:600;fill:#1a1a1a}.m{font-size:13px;fill:#333}"
        ".l{font-size:13px;fill:#333}</style></defs>",
    ]
    out += [_arrow(a, b) for a, b in NEEDS]
    for n, (title, stem, kind, _) in CHAPTERS.items():
        x, y = _box(n)
        fill, border = COLOURS[kind]
        out.append(
            f'<rect x="{x:g}" y="{y:g}" width="{BOX_W}" height="{BOX_H}" rx="8" '
            f'fill="{fill}" stroke="{border}" stroke-width="1.6"/>'
            f'<text x="{x + 10:g}" y="{y + 21:g}" class="t">{n} · {escape(title)}</text>'
            f'<text x="{x + 10:g}" y="{y + 40:g}" class="m">about {minutes(stem)} min</text>'
        )
    x = MARGIN
    for kind, label in LEGEND:
        fill, border = COLOURS[kind]
        out.append(
            f'<rect x="{x}" y="{legend_y}" width="14" height="14" rx="3" fill="{fill}" stroke="{border}"/>'
            f'<text x="{x + 19}" y="{legend_y + 12}" class="l">{label}</text>'
        )
        x += 19 + round(7.5 * len(label)) + 18
    out.append("</svg>")
    return "\n".join(out) + "\n"


def draw_phone() -> str:
    """The picture for a phone: one column, 360 wide (shown at its size, text at 14 px)."""
    width, box_h, gap = 360, 46, 8
    order = sorted(CHAPTERS)
    height = TOP + len(order) * (box_h + gap) + 8
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-labelledby="map-title" '
        'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif">',
        '<title id="map-title">The chapters, what each needs first, and about how long each takes</title>',
        "<defs><style>.t{font-size:14px;font-weight:600;fill:#1a1a1a}.m{font-size:13px;fill:#333}</style></defs>",
    ]
    for i, n in enumerate(order):
        title, stem, kind, _ = CHAPTERS[n]
        y = TOP + i * (box_h + gap)
        fill, border = COLOURS[kind]
        needs = [a for a, b in NEEDS if b == n]
        after = f"after {', '.join(map(str, needs))}" + (" if new to JAX" if (0, n) in OPTIONAL else "")
        note = f"{after} · about {minutes(stem)} min" if needs else f"start here · about {minutes(stem)} min"
        out.append(
            f'<rect x="1" y="{y}" width="{width - 2}" height="{box_h}" rx="8" fill="{fill}" '
            f'stroke="{border}" stroke-width="1.6"/>'
            f'<text x="11" y="{y + 19}" class="t">{n} · {escape(title)}</text>'
            f'<text x="11" y="{y + 37}" class="m">{escape(note)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed picture is out of date")
    args = parser.parse_args()
    texts = {"wide": draw(), "phone": draw_phone()}
    for kind, target in TARGETS.items():
        name = target.relative_to(ROOT)
        if not args.check:
            target.write_text(texts[kind])
            print(f"wrote {name}")
        elif not target.exists() or target.read_text() != texts[kind]:
            sys.exit(f"{name} is out of date: run `python tools/chapter_map.py` and commit it")
    if args.check:
        print("the chapter map is up to date: ok")


if __name__ == "__main__":
    main()
