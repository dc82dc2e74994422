"""Sphinx extension: a figure's phone image on narrow screens, and a build that fails on small text.

A notebook that ran ``shardbook.setup()`` shows every matplotlib figure as its PNG plus, in the output's
metadata, a phone drawing of it (shardbook/viz/phone.py). myst-nb writes the PNG to ``_images/<sha256 of
its bytes>.png``; this extension finds each such ``<img>`` on the page and makes it a ``<picture>`` whose
``<source media=...>`` offers the phone image below the phone breakpoint (699.98 px, as in
_static/shardbook.css), the desktop image staying the ``<img>`` with its alt text. The ``<img>`` carries
the smallest text of both images in CSS px (``data-sb-text-px``, ``data-sb-phone-text-px``) for
tools/site_check.py, which measures them in Chromium as a reader's phone shows them.

The build warns (an error under ``-W``) when a figure has no phone image, when its phone image has text
smaller than the phone's body text (:data:`shardbook.viz.phone.PHONE_BODY_PX`), or when its texts
overlap. Images a cell shows as HTML (matplotlib's JS animation) are not PNG outputs and not checked.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Any

from shardbook.viz.phone import PHONE_BODY_PX, PHONE_KEY

#: As in _static/shardbook.css and _static/shardbook-output.js: below this width the page is a phone's.
PHONE_MEDIA = "(max-width: 699.98px)"
OUTPUT_FOLDER = "jupyter_execute"  # myst-nb's folder of executed notebooks, beside the HTML's
IMG = re.compile(r'<img\b[^>]*?\bsrc="(?P<dir>[^"]*?)(?P<hash>[0-9a-f]{64})\d*\.png"[^>]*?(?P<end>\s*/?>)')


def figure_outputs(notebook: dict) -> list[tuple[int, str, dict[str, Any] | None]]:
    """(cell index, sha256 of the PNG, the phone metadata or None) of every PNG output of a notebook."""
    found = []
    for index, cell in enumerate(notebook.get("cells", [])):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png is None:
                continue
            png = "".join(png) if isinstance(png, list) else png
            digest = hashlib.sha256(base64.b64decode(png)).hexdigest()
            found.append((index, digest, output.get("metadata", {}).get(PHONE_KEY)))
    return found


def phone_findings(notebook: dict, body_px: float = PHONE_BODY_PX) -> list[str]:
    """What is wrong with a notebook's figures on a phone: one sentence per figure.

    Example:
      >>> phone_findings({"cells": []})
      []
    """
    findings = []
    for index, _, phone in figure_outputs(notebook):
        where = f"cell {index}"
        if phone is None:
            findings.append(f"{where}: a figure without a phone image (was shardbook.setup() run?)")
        elif "error" in phone:
            findings.append(f"{where}: its phone image could not be drawn: {phone['error']}")
        elif phone["min_text_px"] < body_px:
            findings.append(
                f"{where}: the phone image's text {phone['min_text']!r} is {phone['min_text_px']:.1f} px,"
                f" smaller than the body text's {body_px:g} px"
            )
        elif phone.get("overlaps"):
            pairs = "; ".join(" / ".join(repr(t) for t in pair) for pair in phone["overlaps"][:3])
            findings.append(f"{where}: texts overlap in the phone image: {pairs}")
    return findings


def picture_html(body: str, phones: dict[str, dict[str, Any]], names: dict[str, str]) -> str:
    """``body`` with every ``<img>`` of a figure that has a phone image made a ``<picture>``.

    ``phones`` maps a desktop PNG's sha256 to its phone metadata, ``names`` to the phone file's name
    (in the same folder as the desktop image)."""

    def replace(match: re.Match) -> str:
        phone = phones.get(match["hash"])
        if phone is None or "png" not in phone:
            return match.group(0)
        img = match.group(0)
        end = match["end"]
        data = (
            f' data-sb-text-px="{phone["desktop_min_text_px"]}"'
            f' data-sb-phone-text-px="{phone["min_text_px"]}"'
            f' data-sb-phone-src="{html.escape(names[match["hash"]])}"'
        )
        img = img[: len(img) - len(end)] + data + end
        source = (
            f'<source media="{PHONE_MEDIA}" srcset="{match["dir"]}{names[match["hash"]]} {phone["density"]}x"'
            f' width="{phone["width"]}" height="{phone["height"]}">'
        )
        return f'<picture class="sb-figure">{source}{img}</picture>'

    return IMG.sub(replace, body)


def _executed_notebook(app, pagename: str) -> dict | None:
    path = Path(app.outdir).parent / OUTPUT_FOLDER / f"{pagename}.ipynb"
    return json.loads(path.read_text()) if path.exists() else None


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if app.builder.format != "html" or "body" not in context:
        return
    notebook = _executed_notebook(app, pagename)
    if notebook is None:
        return
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    for finding in phone_findings(notebook):
        logger.warning(f"figure on a phone: {finding}", location=pagename)
    phones, names = {}, {}
    images = Path(app.outdir) / "_images"
    for _, digest, phone in figure_outputs(notebook):
        if phone is None or "png" not in phone:
            continue
        data = base64.b64decode(phone["png"])
        name = hashlib.sha256(data).hexdigest() + ".png"
        images.mkdir(parents=True, exist_ok=True)
        if not (images / name).exists():
            (images / name).write_bytes(data)
        phones[digest], names[digest] = phone, name
    context["body"] = picture_html(context["body"], phones, names)


def setup(app) -> dict:
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
