"""Sphinx extension: a chapter's page offers the notebook Colab opens, as when chapters were .ipynb.

A chapter's source is book/NN_x.md; book/NN_x.ipynb is generated from it (`make sources`). The
theme's launch button already links Colab to the .ipynb beside a .md page. Its download menu would
offer the .md, and as ".ipynb" the executed notebook; this makes it offer one ".ipynb", the committed
notebook, as it did before. Pages whose source has no .ipynb beside it are left alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def _generated_notebook(app, pagename: str) -> Path | None:
    if pagename not in app.env.found_docs:
        return None
    source = Path(app.env.doc2path(pagename))
    notebook = source.with_suffix(".ipynb")
    return notebook if source.suffix == ".md" and notebook.exists() else None


def _page_context(app, pagename, templatename, context, doctree) -> None:
    """Before the theme's buttons (priority 501): the page's source is its .ipynb."""
    notebook = _generated_notebook(app, pagename)
    if notebook is not None and context.get("sourcename"):
        context["sourcename"] = pagename + ".ipynb"
        context["page_source_suffix"] = ".ipynb"


def _build_finished(app, exception) -> None:
    """Sphinx copied the .md under the .ipynb's name; the committed .ipynb replaces it."""
    if exception is not None or app.builder.format != "html" or not app.config.html_copy_source:
        return
    for pagename in sorted(app.env.found_docs):
        notebook = _generated_notebook(app, pagename)
        if notebook is not None:
            target = Path(app.outdir) / "_sources" / (pagename + ".ipynb")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(notebook, target)


def setup(app):
    app.connect("html-page-context", _page_context, priority=400)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
