"""Sphinx extension: what a chapter's page keeps folded, without JavaScript.

* A pop quiz's answer, written ``{admonition} Answer`` with ``:class: dropdown`` (the form
  tools/quizzes.py reads, and the one Colab and Jupyter show as a box), is folded in the page by
  sphinx-togglebutton's script only: in reader mode, in print, in a feed or with scripts off it
  stands open under its question. Every ``dropdown`` admonition becomes a ``<details>`` instead
  (sphinx-design's dropdown, the same markup as its ``{dropdown}`` directive), closed by the browser
  itself.
* The setup cell, the same first code cell in every notebook (tools/notebooks.py ``SETUP_MARK``),
  would open every page with twenty lines the reader has already read: its code is folded under
  one line, and what it printed (the devices) stays shown. The notebooks keep it as it is: Colab
  runs it.
"""

from __future__ import annotations

from typing import Any

SETUP_SHOW = "Show the setup cell (the same in every chapter)"
SETUP_HIDE = "Hide the setup cell"


def _setup_mark() -> str:
    from tools.notebooks import SETUP_MARK

    return SETUP_MARK


def fold_answers(doctree: Any) -> int:
    """Replaces every dropdown admonition of ``doctree`` with a sphinx-design dropdown; returns how
    many it folded."""
    from docutils import nodes  # type: ignore[import-untyped]
    from sphinx_design.shared import create_component

    folded = 0
    for node in list(doctree.findall(nodes.admonition)):
        if "dropdown" not in node.get("classes", []) or not node.children:
            continue
        title = node.children[0]
        if not isinstance(title, nodes.title):
            continue
        rubric = nodes.rubric(title.astext(), "", *title.children)
        kept = [c for c in node["classes"] if c not in ("dropdown", "admonition")]
        dropdown = create_component(
            "dropdown",
            opened=False,
            type="dropdown",
            has_title=True,
            icon=None,
            chevron=None,
            container_classes=["sd-mb-3", "sb-fold", *kept],
            title_classes=[],
            body_classes=[],
            children=[rubric, *node.children[1:]],
        )
        dropdown["ids"] = node.get("ids", [])
        node.replace_self(dropdown)
        folded += 1
    return folded


def fold_setup_cell(doctree: Any) -> bool:
    """Folds the input of the page's setup cell (myst-nb's ``hide-input``, its output kept);
    returns whether the page had one."""
    from docutils import nodes

    mark = _setup_mark()
    for node in doctree.findall(nodes.container):
        if node.get("nb_element") != "cell_code" or not node.children:
            continue
        source = node.children[0]
        if source.get("nb_element") != "cell_code_source":
            continue
        if not source.astext().lstrip().startswith(mark):
            return False  # only the first code cell of a page is its setup cell
        if not node.get("hide_mode"):
            node["hide_mode"] = "input"
            node["prompt_show"] = SETUP_SHOW
            node["prompt_hide"] = SETUP_HIDE
        return True
    return False


def _doctree_read(app: Any, doctree: Any) -> None:
    fold_answers(doctree)
    fold_setup_cell(doctree)


def setup(app: Any) -> dict:
    app.connect("doctree-read", _doctree_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
