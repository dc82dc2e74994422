"""Every figure twice: as drawn (the desktop image) and redrawn for a phone's text column.

On a 390 px wide phone the book's column is :data:`PHONE_COLUMN_PX` CSS px wide, and a figure drawn 7
inches wide is shrunk into it until its labels are 5 to 7 px tall. So a notebook that ran
``shardbook.setup()`` with :data:`PHONE_FIGURES_ENV` set (the book's own runs: tools/notebooks.py and
make book set it; Colab and grading do not, and draw each figure once) shows a matplotlib figure as two
PNGs in one output: the figure as drawn (what Jupyter and Colab show) and, in the output's metadata
under :data:`PHONE_KEY`, a phone drawing whose every label is at least :data:`PHONE_BODY_PX` CSS px, the
body text's size there. The book's pages offer the phone image on narrow screens only
(tools/phone_figures.py writes a ``<picture>``), and the build fails when a figure has no phone image or
one with text smaller than the body text.

The phone drawing is, in order of preference: the figure's own phone design (a function set with
:func:`set_phone_design`, for figures too dense to scale: a ring's steps), its panels' own designs
(:func:`set_phone_panel`, for a figure a chapter lays out from several drawings: pipeline schedules), or
the figure refitted: copied, panels side by side stacked, every text made at least body size, and
laid out again in the column's width.

Both sizes were measured in Chromium on the built site (390x844, pydata-sphinx-theme): the article's
paragraphs are 16 px, the column 358 px (tools/site_check.py measures them again on every page).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import pickle
import textwrap
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text

#: Width of the book's text column on a 390x844 phone, in CSS px (measured in Chromium).
PHONE_COLUMN_PX = 358
#: Font size of the book's body text on a phone, in CSS px (measured in Chromium).
PHONE_BODY_PX = 16.0
#: The output metadata key of the phone image and its measurements.
PHONE_KEY = "shardbook/phone"
#: The environment variable under which ``shardbook.setup()`` adds a phone image to every figure.
PHONE_FIGURES_ENV = "SHARDBOOK_PHONE_FIGURES"
#: Pixels per CSS px of the phone image (sharp on a phone's 2x and 3x screens).
PHONE_DENSITY = 3
# How much larger than the smallest label the largest may be drawn on a phone (titles over tick labels).
_LARGEST = 1.25
_DESIGN_ATTR = "_shardbook_phone_design"
# A figure drawn off screen: the texts it drew, and the renderer that measures them.
_Drawing = tuple[list["Text"], Any]


def set_phone_design(fig: Figure, draw: Callable[[], Figure]) -> Figure:
    """Gives ``fig`` its own phone drawing: ``draw()`` returns a new figure for the phone's column.

    A drawing function whose picture cannot simply be scaled (too many columns, labels inside small
    cells) sets one, so that every notebook that shows it gets the phone design. Returns ``fig``.
    """
    setattr(fig, _DESIGN_ATTR, draw)
    return fig


def set_phone_panel(ax: Axes, draw: Callable[[Axes], None], height_in: float) -> Axes:
    """Gives the panel ``ax`` its own phone drawing, for figures a chapter lays out itself:
    ``draw(phone_ax)`` draws it anew into a panel ``height_in`` inches tall. When every panel of a
    figure has one, the phone figure puts them side by side in the column's width. Returns ``ax``."""
    setattr(ax, _DESIGN_ATTR, (draw, height_in))
    return ax


def _panels_figure_designs(fig: Figure) -> list[tuple[Callable[[Axes], None], float]] | None:
    found = [getattr(ax, _DESIGN_ATTR, None) for ax in fig.axes]
    designs = [d for d in found if d is not None]
    return designs if designs and len(designs) == len(found) else None


def _panels_figure(fig: Figure) -> Figure | None:
    """The phone figure of a figure whose every panel has a phone drawing (:func:`set_phone_panel`)."""
    import matplotlib.pyplot as plt

    designs = _panels_figure_designs(fig)
    if designs is None:
        return None
    height = max(d[1] for d in designs)
    phone, axes = plt.subplots(1, len(designs), figsize=(phone_width_in(), height), squeeze=False)
    for ax, (draw, _) in zip(axes[0], designs, strict=True):
        draw(ax)
    phone.tight_layout()
    return phone


def phone_width_in() -> float:
    """The phone figure's width in inches: 1 pt of the figure is 1 CSS px in the column."""
    return PHONE_COLUMN_PX / 72


@contextlib.contextmanager
def _drawn_texts() -> Iterator[list[Text]]:
    """Records every Text artist that draws something (visible, non-empty) while the block runs."""
    from matplotlib.text import Text

    drawn: list[Text] = []
    original = Text.draw

    def draw(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return original(self, renderer)

    Text.draw = draw  # type: ignore[method-assign]
    try:
        yield drawn
    finally:
        Text.draw = original  # type: ignore[method-assign]


@functools.cache
def _layout_canvas() -> type[Any]:
    """The phone copy's canvas: matplotlib's Agg canvas, which can measure with one renderer while
    the figure is laid out at one height after another (:func:`_one_renderer`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    class LayoutCanvas(FigureCanvasAgg):
        kept: Any = None  # the renderer that measures, whatever the figure's size (None: Agg's own)

        def get_renderer(self):
            kept = self.kept
            if kept is None or kept.dpi != self.figure.dpi or self.is_saving():
                return super().get_renderer()
            return kept

    return LayoutCanvas


@contextlib.contextmanager
def _one_renderer(fig: Figure) -> Iterator[None]:
    """Within the block, the phone copy ``fig`` is measured by one renderer, whatever its size; it
    is only drawn off screen there (:func:`_draw`), never painted. matplotlib keeps each text's
    measures per renderer, and Agg makes a new one for each new size: it would measure every text
    again, with the same results (they depend on the dpi alone), at each height the layout tries."""
    canvas: Any = fig.canvas
    if not isinstance(canvas, _layout_canvas()):
        yield
        return
    canvas.kept = canvas.get_renderer()
    try:
        yield
    finally:
        canvas.kept = None


def _agg_canvas(fig: Figure) -> Any:
    """``fig``'s canvas, made matplotlib's Agg canvas (off screen) if it is another."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)


def _draw(fig: Figure) -> _Drawing:
    """Draws ``fig`` off screen once: (the texts it drew, the renderer that measures them).

    Nothing is painted (as in ``Figure.draw_without_rendering`` and in ``savefig``'s first pass):
    every artist is placed and every text laid out as in a drawing, for a third of its CPU time."""
    renderer = _agg_canvas(fig).get_renderer()
    with _drawn_texts() as drawn, renderer._draw_disabled():
        fig.draw(renderer)
    return drawn, renderer


def text_sizes(fig: Figure) -> list[tuple[float, str]]:
    """(font size in points, text) of every text the figure draws, smallest first.

    Example:
      >>> import matplotlib; matplotlib.use("Agg")
      >>> import matplotlib.pyplot as plt
      >>> fig, ax = plt.subplots(); _ = ax.set_title("t", fontsize=14); ax.set_axis_off()
      >>> text_sizes(fig)
      [(14.0, 't')]
    """
    return _sizes(_draw(fig)[0])


def _sizes(drawn: list[Text]) -> list[tuple[float, str]]:
    return sorted((float(t.get_fontsize()), t.get_text()) for t in drawn)


def _png(fig: Figure, dpi: float) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return out.getvalue()


def _png_width(png: bytes) -> int:
    return int.from_bytes(png[16:20], "big")


def _png_height(png: bytes) -> int:
    return int.from_bytes(png[20:24], "big")


def desktop_text_px(
    fig: Figure, png_width: int, sizes: list[tuple[float, str]] | None = None
) -> tuple[float, float]:
    """The smallest text of the desktop image in CSS px: at its own size, and shrunk into the phone's
    column (how a phone showed every figure before it had a phone image). ``sizes``: the figure's
    :func:`text_sizes`, if already measured (each measure draws the figure)."""
    sizes = text_sizes(fig) if sizes is None else sizes
    if not sizes:
        return (0.0, 0.0)
    px = sizes[0][0] * fig.dpi / 72
    return px, px * min(1.0, PHONE_COLUMN_PX / png_width)


def _restack(fig: Figure) -> int:
    """Panels side by side (one row of subplots) become one column; returns the number of rows."""
    from matplotlib.gridspec import GridSpec

    axes = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    specs: list[Any] = [ax.get_subplotspec() for ax in axes]
    if not specs:
        return 1
    grid = specs[0].get_gridspec()
    rows, cols = grid.get_geometry()
    if any(s.get_gridspec() is not grid for s in specs) or rows != 1 or cols == 1:
        return rows
    stacked = GridSpec(cols, 1, figure=fig)
    for ax, spec in zip(axes, specs, strict=True):
        ax.set_subplotspec(stacked[spec.colspan.start : spec.colspan.stop, 0])
    return cols


def _grow_texts(fig: Figure, smallest: float, target: float) -> None:
    """Every text at least `target` pt: the smallest becomes `target`, the largest at most
    `_LARGEST` times it, in between in proportion; a text wider than the figure wraps."""
    from matplotlib.text import Text
    from matplotlib.ticker import MaxNLocator

    def grown(size: float) -> float:
        return min(target * _LARGEST, max(target, target * size / smallest))

    ticks: set[int] = set()
    for ax in fig.axes:
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            labels = axis.get_ticklabels(which="both")
            ticks.update(id(label) for label in labels)
            if labels:
                size = grown(float(labels[0].get_fontsize()))
                ax.tick_params(axis=which, which="both", labelsize=size)  # type: ignore[arg-type]
            if which == "x" and isinstance(axis.get_major_locator(), MaxNLocator):  # numbers, not names
                if len(axis.get_majorticklocs()) > 5:
                    ax.locator_params(axis="x", nbins=4)
    # A legend inside a panel covers its lines or bars once its text is body size: the figure's one
    # such legend goes under the panels.
    inside = [ax for ax in fig.axes if ax.get_legend() is not None and _anchor(ax.get_legend()) is None]
    for ax in fig.axes:
        _one_column_legend(ax, below=len(inside) == 1 and ax is inside[0])
    for text in fig.findobj(Text):
        if id(text) not in ticks:
            text.set_fontsize(grown(float(text.get_fontsize())))
    # Titles, axis labels and the figure's own texts are broken into lines that fit the column, before
    # the layout (which then makes room for them); texts in a panel wrap at the figure's edge. (A
    # legend's texts cannot wrap: matplotlib lays them out in a box without a renderer.)
    for ax in fig.axes:
        titles: list[Any] = [ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)]
        for free in [*titles, ax.xaxis.label]:
            if free is not None:  # a panel's title is centred on it: as wide as a panel beside a label
                _break_lines(free, 0.7 if free in titles else 1.0)
        for free in ax.texts:
            free.set_wrap(True)
    for free in [*fig.texts, getattr(fig, "_suptitle", None)]:
        if free is not None:
            _break_lines(free)


def _break_lines(text: Text, share: float = 1.0) -> None:
    """Breaks ``text`` into lines no wider than ``share`` of the phone's column (DejaVu Sans: about
    0.56 em a character); mathtext ($...$) is left whole."""
    content = text.get_text()
    if "$" in content or not content.strip():
        return
    chars = max(12, int(share * (PHONE_COLUMN_PX - 16) / (0.56 * float(text.get_fontsize()))))
    lines = [textwrap.fill(line, chars) if line else line for line in content.split("\n")]
    text.set_text("\n".join(lines))


def _anchor(legend: Any) -> Any:
    """Where a chapter put its legend (a bbox in its own coordinates), or None: matplotlib's choice."""
    return getattr(legend, "_bbox_to_anchor", None)


def _one_column_legend(ax: Axes, below: bool = False) -> None:
    """The legend again, one entry a line: a row of entries at body size is wider than a phone. One
    right of its panel, or (``below``) inside it, goes under the panels."""
    legend: Any = ax.get_legend()
    if legend is None:
        return
    handles: Any = legend.legend_handles
    labels = [text.get_text() for text in legend.get_texts()]
    anchor = _anchor(legend)
    placed = {}
    right = anchor is not None and hasattr(anchor, "_bbox") and anchor._bbox.x0 >= 1.0
    if anchor is not None and hasattr(anchor, "_bbox"):
        placed = {"bbox_to_anchor": anchor._bbox.bounds, "bbox_transform": anchor._transform}
    if below or (right and anchor._transform == ax.transAxes):  # no room beside the panel
        legend.remove()
        fontsize = legend.get_texts()[0].get_fontsize() if labels else None
        ax.figure.legend(handles, labels, loc="lower left", bbox_to_anchor=(0, 0),
                         frameon=False, fontsize=fontsize, ncols=1)  # fmt: skip
        return
    ax.legend(
        handles,
        labels,
        loc=legend._loc,
        frameon=legend.get_frame_on(),
        fontsize=legend.get_texts()[0].get_fontsize() if labels else None,
        ncols=1,
        **placed,
    )


def refit_for_phone(
    fig: Figure,
    target_px: float = PHONE_BODY_PX,
    width_in: float | None = None,
    sizes: list[tuple[float, str]] | None = None,
) -> Figure:
    """A copy of ``fig`` laid out for the phone's column: panels stacked, every text at least
    ``target_px`` CSS px when shown :data:`PHONE_COLUMN_PX` px wide. ``sizes``: ``fig``'s
    :func:`text_sizes`, if already measured."""
    return _refit(fig, target_px, width_in, sizes)[0]


def _refit(
    fig: Figure,
    target_px: float = PHONE_BODY_PX,
    width_in: float | None = None,
    sizes: list[tuple[float, str]] | None = None,
) -> tuple[Figure, _Drawing | None]:
    """:func:`refit_for_phone`, and the copy's last drawing as laid out (None: changed since)."""
    sizes = text_sizes(fig) if sizes is None else sizes
    with warnings.catch_warnings():  # Python 3.12-3.13 warn of itertools' pickling (a Figure's cyclers)
        warnings.simplefilter("ignore", DeprecationWarning)
        phone: Figure = pickle.loads(pickle.dumps(fig))
    _layout_canvas()(phone)  # drawn off screen, whatever backend the notebook uses
    old_w, old_h = fig.get_size_inches()
    before_rows = _rows(fig)
    rows = _restack(phone)
    width = width_in or phone_width_in()
    if sizes:
        _grow_texts(phone, sizes[0][0], target_px * 1.06)  # a margin for what the tight bounding box adds
    growth = (target_px / sizes[0][0]) if sizes else 1.0
    height = old_h / before_rows * rows * max(width / old_w * max(1.0, growth * 0.75), 0.62)
    phone.set_size_inches(width, max(height, 2.4))
    return phone, _lay_out(phone)


def _lay_out(fig: Figure, rounds: int = 9) -> _Drawing | None:
    """tight_layout, then: tick labels that run into each other turned upright, and the figure taller
    until no texts are drawn over each other and panels of fixed aspect fill their slots' width (the
    column's width is what a phone has; its height is free, up to four widths a panel). Where no
    height clears every overlap, the height with the fewest. Returns the last drawing of the figure
    as laid out, for measuring it again (None where the layout changed after it)."""
    width, height = fig.get_size_inches()
    tallest = 4 * width * max(1, len(fig.axes))
    tried: list[tuple[int, float]] = []
    with _one_renderer(fig):
        for _ in range(rounds):
            fig.set_size_inches(width, height)
            _tight(fig)
            drawing = _draw(fig)  # one drawing for both checks, unless a label is turned
            if _upright_crowded_ticks(fig, drawing[1]):
                drawing = _draw(fig)
            pairs = _overlaps(*drawing)
            last: _Drawing | None = drawing  # the figure as it is now
            before = [(t, t.get_text()) for ax in fig.axes for t in ax.texts]
            if pairs and _stack_words(fig, pairs):
                _tight(fig)
                last = _draw(fig)
                stacked = _overlaps(*last)
                if len(stacked) < len(pairs):
                    pairs = stacked
                else:  # one word a line did not help: the labels as they were
                    for text, words in before:
                        text.set_text(words)
                    _tight(fig)
                    last = None
            overlaps = len(pairs)
            narrow = _aspect_shortfall(fig)
            tried.append((overlaps, height))
            if (not overlaps and narrow == 1.0) or height >= tallest:
                return last
            grow = 1 + 0.6 * (min(narrow, 2.0) - 1) if narrow > 1.0 else 1.2
            height = min(height * max(grow, 1.05), tallest)
        best = min(tried)
        if best[1] != height:
            fig.set_size_inches(width, best[1])
            _tight(fig)
    return None


def _tight(fig: Figure) -> None:
    """tight_layout in the room the figure's own texts and legends (a key, a note) leave: those in its
    lower third stay below the panels, those in its upper third (not the suptitle) above."""
    if fig.texts or fig.legends:  # drawn to place them (tight_layout measures the panels itself)
        renderer = _draw(fig)[1]
    else:
        renderer = _agg_canvas(fig).get_renderer()
    bottom, top = 0.0, 1.0
    for item in [*fig.texts, *fig.legends]:
        box = item.get_window_extent(renderer)
        y0, y1 = box.y0 / fig.bbox.height, box.y1 / fig.bbox.height
        if y1 < 0.34:
            bottom = max(bottom, y1 + 0.01)
        elif y0 > 0.66:
            top = min(top, y0 - 0.01)
    with contextlib.suppress(Exception), _panels_measured_once(fig):
        fig.tight_layout(rect=(0, bottom, 1, top))


@contextlib.contextmanager
def _panels_measured_once(fig: Figure) -> Iterator[None]:
    """Within the block, each panel measures its tight bounding box once: tight_layout given a
    ``rect`` measures every panel twice (for its margins, then in the rect they leave), the figure
    unchanged in between, and each measure lays out every tick label again."""
    for ax in fig.axes:
        measured: dict[tuple[int, bool], Any] = {}

        def once(renderer=None, *args, _ax=ax, _measured=measured, **kwargs):
            measure = type(_ax).get_tightbbox
            if args or set(kwargs) - {"for_layout_only"}:  # not tight_layout's question
                return measure(_ax, renderer, *args, **kwargs)
            key = (id(renderer), kwargs.get("for_layout_only", False))
            if key not in _measured:
                _measured[key] = measure(_ax, renderer, **kwargs)
            return _measured[key]

        ax.get_tightbbox = once  # type: ignore[method-assign]
    try:
        yield
    finally:
        for ax in fig.axes:
            vars(ax).pop("get_tightbbox", None)


def _aspect_shortfall(fig: Figure) -> float:
    """How much taller the figure must be for its panels of fixed aspect to fill their slots' width."""
    short = 1.0
    for ax in fig.axes:
        slot, drawn = ax.get_position(original=True), ax.get_position()
        if 0 < drawn.width < 0.9 * slot.width:
            short = max(short, slot.width / drawn.width)
    return short


def _upright_crowded_ticks(fig: Figure, renderer: Any) -> bool:
    """x tick labels that overlap their neighbours in the figure as just drawn are turned upright
    (categories' names); returns whether any were (the figure is then laid out again)."""
    turned = False
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text().strip()]
        boxes = [t.get_window_extent(renderer) for t in labels]
        if any(a.overlaps(b) for a, b in zip(boxes, boxes[1:], strict=False)):
            ax.tick_params(axis="x", labelrotation=90)
            _tight(fig)
            _draw(fig)  # the next panels' labels as laid out now
            turned = True
    return turned


def overlapping_texts(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of texts the figure draws one over the other (their boxes overlap by more than 1 px)."""
    return [(a.get_text(), b.get_text()) for a, b in _overlapping(fig)]


def _overlapping(fig: Figure) -> list[tuple[Text, Text]]:
    return _overlaps(*_draw(fig))


def _overlaps(drawn: list[Text], renderer: Any) -> list[tuple[Text, Text]]:
    """The pairs of ``drawn`` texts whose boxes overlap by more than 1 px."""
    boxes = [(t, t.get_window_extent(renderer).expanded(1, 1).padded(-1)) for t in drawn]
    pairs = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            if box_a.overlaps(box_b):
                pairs.append((a, b))
    return pairs


def _stack_words(fig: Figure, pairs: list[tuple[Text, Text]]) -> bool:
    """Labels inside a panel that run into each other side by side ("p0 d2048" in narrow blocks) are
    set one word a line; returns whether any was."""
    renderer = _agg_canvas(fig).get_renderer()
    inside = {id(t) for ax in fig.axes for t in ax.texts}
    changed = False
    for a, b in pairs:
        box_a, box_b = a.get_window_extent(renderer), b.get_window_extent(renderer)
        beside = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0) > 0.5 * min(box_a.height, box_b.height)
        if not (beside and id(a) in inside and id(b) in inside):  # two labels of a panel side by side
            continue
        for text in (a, b):
            words = text.get_text()
            if " " in words and "$" not in words:
                text.set_text(words.replace(" ", "\n"))
                changed = True
    return changed


def _rows(fig: Figure) -> int:
    specs: list[Any] = [ax.get_subplotspec() for ax in fig.axes if ax.get_subplotspec() is not None]
    return specs[0].get_gridspec().get_geometry()[0] if specs else 1


def phone_figure(fig: Figure, sizes: list[tuple[float, str]] | None = None) -> Figure:
    """The phone drawing of ``fig``: its own design (:func:`set_phone_design`) or the refitted copy
    (``sizes``: ``fig``'s :func:`text_sizes`, if already measured)."""
    design = getattr(fig, _DESIGN_ATTR, None)
    if design is not None:
        return design()
    return _panels_figure(fig) or refit_for_phone(fig, sizes=sizes)


def phone_image(fig: Figure, sizes: list[tuple[float, str]] | None = None) -> dict[str, Any]:
    """The phone PNG of ``fig`` (base64) and what the book checks of it: its width in CSS px
    (:data:`PHONE_COLUMN_PX`), height, and smallest text in CSS px at that width.

    A refitted figure whose bounding box came out wider than the column (a label past the edge) is
    shown shrunk, its text below body size: it is refitted once more, as much narrower. ``sizes``:
    ``fig``'s :func:`text_sizes`, if already measured (each measure draws the figure)."""
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():  # a layout matplotlib cannot make is measured below, not printed
        warnings.simplefilter("ignore")
        refitted = getattr(fig, _DESIGN_ATTR, None) is None and _panels_figure_designs(fig) is None
        phone, drawing = _refit(fig, sizes=sizes) if refitted else (phone_figure(fig), None)
        info = _measure(phone, drawing)
        if refitted and 0 < info["min_text_px"] < PHONE_BODY_PX:
            plt.close(phone)
            narrower = phone_width_in() * info["min_text_px"] / (PHONE_BODY_PX * 1.01)
            phone, drawing = _refit(fig, width_in=narrower, sizes=sizes)
            info = _measure(phone, drawing)
    plt.close(phone)
    return info


def _measure(phone: Figure, drawing: _Drawing | None = None) -> dict[str, Any]:
    """The phone image's PNG and measures. ``drawing``: the figure's last drawing, if unchanged
    since (else it is drawn once, for its text sizes and overlaps)."""
    drawn, renderer = drawing or _draw(phone)
    sizes, overlaps = _sizes(drawn), _overlaps(drawn, renderer)
    dpi = 72.0 * PHONE_DENSITY
    png = _png(phone, dpi)
    density = _png_width(png) / PHONE_COLUMN_PX  # shown PHONE_COLUMN_PX wide, whatever the bbox added
    smallest = sizes[0][0] * dpi / 72 / density if sizes else 0.0
    return {
        "png": base64.b64encode(png).decode("ascii"),
        "width": PHONE_COLUMN_PX,
        "height": round(_png_height(png) / density),
        "density": round(density, 4),
        "min_text_px": round(smallest, 2),
        "min_text": sizes[0][1] if sizes else "",
        "overlaps": [[a.get_text(), b.get_text()] for a, b in overlaps[:5]],
    }


def figure_bundle(fig: Figure) -> tuple[dict[str, Any], dict[str, Any]]:
    """IPython's display of a figure: the PNG Jupyter shows (as matplotlib's inline backend draws
    it) and, in the metadata, the phone image (:func:`phone_image`). A figure whose phone drawing
    fails is shown as before, without one (the book's build then names it)."""
    from IPython.core.pylabtools import print_figure

    with _drawn_texts() as drawn:  # the texts the desktop image draws: measured in drawing it
        png = print_figure(fig, "png", bbox_inches="tight")
    if png is None:  # an empty figure: IPython shows nothing either
        return {}, {}
    data = {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": repr(fig)}
    metadata: dict[str, Any] = {}
    try:
        # print_figure draws the figure twice (to find its tight box, then to paint it)
        sizes = _sizes(list({id(t): t for t in drawn}.values()))
        phone = phone_image(fig, sizes)
    except Exception as error:  # the learner's own figure must still show
        where = traceback.extract_tb(error.__traceback__)[-1]
        metadata[PHONE_KEY] = {
            "error": f"{type(error).__name__}: {error} ({Path(where.filename).name}:{where.lineno})"
        }
    else:
        px, fitted = desktop_text_px(fig, _png_width(png), sizes)
        phone.update(desktop_min_text_px=round(px, 2), fitted_min_text_px=round(fitted, 2))
        metadata[PHONE_KEY] = phone
    return data, metadata


def show_figures_for_phones(shell: Any) -> None:
    """Makes IPython ``shell`` display every matplotlib figure with :func:`figure_bundle`."""
    formatter = shell.display_formatter.mimebundle_formatter

    def bundle(fig, include=None, exclude=None):
        return figure_bundle(fig)

    formatter.for_type_by_name("matplotlib.figure", "Figure", bundle)
