"""shardbook/viz/phone.py and tools/phone_figures.py: every figure has a phone image whose text is at
least the body text's size, and the build names a figure whose phone image does not."""

import base64
import hashlib
import json
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from shardbook.viz import phone  # noqa: E402
from tools import phone_figures  # noqa: E402


def _two_panels(fontsize: float = 7.0):
    """Two panels side by side with small labels, as a chapter draws a comparison."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, name in zip(axes, ("before", "after"), strict=True):
        ax.bar(["all-gather", "all-reduce", "permute"], [3, 1, 2])
        ax.set_title(f"{name}: bytes per collective", fontsize=fontsize + 2)
        ax.set_ylabel("MiB", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize)
        ax.text(0, 3, "3 MiB", fontsize=fontsize, ha="center", va="bottom")
        ax.set_ylim(0, 4)
    fig.tight_layout()
    return fig


def _output(fig) -> dict:
    """The output a notebook records for a figure, through the same IPython display path."""
    data, metadata = phone.figure_bundle(fig)
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def _notebook(*outputs) -> dict:
    cells = [{"cell_type": "code", "source": "", "metadata": {}, "outputs": [o]} for o in outputs]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_the_refitted_phone_figure_has_body_size_text_stacked_panels_and_no_overlaps():
    # The property: a figure nobody designed for a phone still gets a phone image whose every text is
    # at least the body text's size in a column of PHONE_COLUMN_PX, its panels one under the other.
    fig = _two_panels()
    before_px, fitted_px = phone.desktop_text_px(fig, 9 * int(fig.dpi))
    assert fitted_px < 6, fitted_px  # shrunk into the phone's column, the desktop image is unreadable
    refitted = phone.refit_for_phone(fig)
    lefts = {round(ax.get_position().x0, 2) for ax in refitted.axes}
    assert len(lefts) == 1, lefts  # stacked
    info = phone.phone_image(fig)
    assert info["width"] == phone.PHONE_COLUMN_PX
    assert info["min_text_px"] >= phone.PHONE_BODY_PX, info["min_text_px"]
    assert info["overlaps"] == []
    assert phone_figures.phone_findings(_notebook(_output(fig))) == []
    plt.close("all")


def test_the_phone_image_is_measured_as_a_fresh_drawing_would_measure_it():
    # The property: what saves the phone image's CPU time changes nothing it shows or reports. The
    # desktop image's texts are read while IPython draws it, the laid-out copy's last drawing is
    # measured again, and the layout measures with one renderer at every height it tries: the same
    # sizes, PNG and measures as drawing anew, and the copy still paints at its own size.
    fig = _two_panels()
    info = phone.figure_bundle(fig)[1][phone.PHONE_KEY]
    smallest = phone.text_sizes(fig)[0][0]
    assert info["desktop_min_text_px"] == round(smallest * fig.dpi / 72, 2)
    copy, drawing = phone._refit(fig)
    assert drawing is not None  # this figure's layout ends on a drawing
    reused = phone._measure(copy, drawing)
    assert reused == phone._measure(copy)
    assert reused == {key: info[key] for key in reused}  # as figure_bundle made it
    copy.set_size_inches(copy.get_size_inches() * [1, 1.5])  # a size the layout never tried
    copy.canvas.draw()
    height, width = copy.canvas.buffer_rgba().shape[:2]
    assert (width, height) == copy.canvas.get_width_height(), (width, height)
    plt.close("all")


@pytest.mark.filterwarnings("ignore:Tight layout not applied")  # a round before the figure grows taller
def test_crowded_category_names_are_turned_upright_on_the_phone():
    # Names that fit side by side on a desktop run into each other in the phone's column: they are
    # turned upright there, and nothing in the phone image is drawn over anything else.
    fig, axes = plt.subplots(1, 2, figsize=(11, 3))
    for ax in axes:
        ax.bar(["all-gather", "all-reduce", "reduce-scatter", "all-to-all", "permute"], [3, 1, 2, 2, 1])
        ax.set_ylabel("MiB")
    fig.tight_layout()
    assert all(t.get_rotation() == 0 for ax in fig.axes for t in ax.get_xticklabels())
    refitted = phone.refit_for_phone(fig)
    assert all(t.get_rotation() == 90 for ax in refitted.axes for t in ax.get_xticklabels())
    assert phone.overlapping_texts(refitted) == []
    assert all(t.get_rotation() == 0 for ax in fig.axes for t in ax.get_xticklabels())  # the copy's
    plt.close("all")


def _small_phone_design():
    """A phone design that keeps an 8 pt title in the column's width: too small on a phone."""
    design, ax = plt.subplots(figsize=(phone.phone_width_in(), 3))
    ax.set_title("bytes per collective", fontsize=8)
    return design


def test_a_phone_image_with_small_text_fails_the_build_check():
    # A check that cannot fail is a defect: a figure whose own phone design keeps 8 pt labels in the
    # column's width is named, with the text and its size.
    fig = _two_panels()

    phone.set_phone_design(fig, _small_phone_design)
    [finding] = phone_figures.phone_findings(_notebook(_output(fig)))
    assert finding.startswith("cell 0: the phone image's text 'bytes per collective' is "), finding
    assert finding.endswith(" px, smaller than the body text's 16 px"), finding
    plt.close("all")


def test_a_figure_without_a_phone_image_or_with_overlapping_text_fails_the_build_check():
    # A PNG shown without shardbook.setup() has no phone image; texts drawn over each other are named.
    fig = _two_panels()
    bare = _output(fig)
    bare["metadata"] = {}

    def crowded():
        design, ax = plt.subplots(figsize=(phone.phone_width_in(), 3))
        ax.text(0.5, 0.5, "all-gather", fontsize=18)
        ax.text(0.52, 0.5, "all-reduce", fontsize=18)
        ax.set_axis_off()
        return design

    phone.set_phone_design(fig, crowded)
    findings = phone_figures.phone_findings(_notebook(bare, _output(fig)))
    assert findings[0] == "cell 0: a figure without a phone image (was shardbook.setup() run?)"
    assert findings[1].startswith("cell 1: texts overlap in the phone image: 'all-gather' / 'all-reduce'")
    plt.close("all")


def test_the_page_offers_the_phone_image_below_the_phone_breakpoint_and_keeps_the_alt_text():
    fig = _two_panels()
    output = _output(fig)
    digest = hashlib.sha256(base64.b64decode(output["data"]["image/png"])).hexdigest()
    info = output["metadata"][phone.PHONE_KEY]
    body = (
        f'<p>x</p><img alt="Two bar charts" src="../_images/{digest}.png" />'
        f'<img alt="other" src="../_images/{"0" * 64}.png" />'
    )
    page = phone_figures.picture_html(body, {digest: info}, {digest: "p.png"})
    assert page.count("<picture") == 1  # the image without a phone drawing is left as it was
    assert f'<source media="(max-width: 699.98px)" srcset="../_images/p.png {info["density"]}x"' in page
    assert 'alt="Two bar charts"' in page and f'data-sb-phone-text-px="{info["min_text_px"]}"' in page
    assert f'<img alt="other" src="../_images/{"0" * 64}.png" />' in page
    plt.close("all")


def test_setup_makes_ipython_show_every_figure_with_its_phone_image(ipython_shell):
    # The one display path: IPython's formatter for any matplotlib Figure, as a notebook uses it.
    phone.show_figures_for_phones(ipython_shell)
    fig = _two_panels()
    data, metadata = ipython_shell.display_formatter.format(fig)
    assert "image/png" in data and metadata[phone.PHONE_KEY]["min_text_px"] >= phone.PHONE_BODY_PX
    json.dumps(metadata)  # what a notebook can store
    plt.close("all")


def test_the_book_build_shows_the_phone_image_and_warns_of_small_text(tmp_path):
    # End to end through Sphinx and myst-nb: the page's figure becomes a <picture> whose phone image
    # is written to _images, and a figure whose phone image has small text is a build warning (an error
    # under -W, as the book is built).
    import nbformat

    from tests.notebooks import sphinx_page

    good = _two_panels()
    bad = _two_panels()

    phone.set_phone_design(bad, _small_phone_design)
    cells = []
    for fig in (good, bad):
        cell = nbformat.v4.new_code_cell("fig")
        output = _output(fig)
        cell.outputs = [nbformat.v4.new_output("display_data", output["data"], metadata=output["metadata"])]
        cell.metadata["mystnb"] = {"image": {"alt": "Two bar charts"}}
        cells.append(cell)
    page, warnings = sphinx_page(tmp_path, cells, "tools.phone_figures")
    assert page.count('<picture class="sb-figure"><source media="(max-width: 699.98px)"') == 2
    assert page.count('alt="Two bar charts"') == 2
    phone_images = re.findall(r'srcset="_images/([0-9a-f]{64}\.png) [0-9.]+x"', page)
    assert len(phone_images) == 2, page
    assert all((tmp_path / "_build" / "_images" / name).exists() for name in phone_images)
    assert "figure on a phone: cell 1: the phone image's text 'bytes per collective'" in warnings, warnings
    assert "cell 0" not in warnings, warnings
    plt.close("all")


def test_only_the_books_own_runs_draw_phone_images(monkeypatch, ipython_shell):
    # Colab and grading run shardbook.setup() too: there a figure is drawn once, as before; the book's
    # runs (tools/notebooks.py, make book) set the variable and get the phone image.
    import IPython
    from matplotlib.figure import Figure

    import shardbook
    from tools import notebooks

    shell = ipython_shell
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    formatter = shell.display_formatter.mimebundle_formatter
    for value, hooked in ((None, False), ("1", True)):
        formatter.pop(Figure, None)
        if value is None:
            monkeypatch.delenv(phone.PHONE_FIGURES_ENV, raising=False)
        else:
            monkeypatch.setenv(phone.PHONE_FIGURES_ENV, value)
        shardbook.setup(quiet=True)
        assert (Figure in formatter) == hooked, value
    assert notebooks._env()[phone.PHONE_FIGURES_ENV] == "1"
    formatter.pop(Figure, None)
