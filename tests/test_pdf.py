"""tools/pdf.py's pieces that need no browser (make pdf-check prints and reads back the real book)."""

from __future__ import annotations

from tools import pdf


def test_the_book_is_the_table_of_contents_without_the_exercises():
    # Property: the intro first, then every chapter and appendix in the site's order; no exercise.
    pages = pdf.book_pages()
    assert pages[0] == "book/intro" and pages[1] == "book/00_jax_for_pytorch_users"
    assert "book/12_many_hosts" in pages and not any(p.startswith("exercises/") for p in pages)


def test_titles_compare_across_ligatures_and_line_breaks():
    # Property: a title Chromium printed with a ligature or broke over two lines is still found.
    assert pdf._flat("7. Autodi\ufb00 and\nsharding") == pdf._flat("7. Autodiff and sharding")


def test_the_combined_document_has_contents_with_page_numbers_and_answers_at_the_chapter_end():
    # Property: the table of contents links each chapter and shows its page once known; a chapter's
    # quiz answers follow its text under their own heading; the print CSS wraps code.
    pieces = [
        {
            "title": "1. Meshes",
            "html": "<h1>1. Meshes</h1><p>text</p>",
            "answers": ["<div>A1</div>"],
            "styles": ["http://x/_static/a.css"],
            "inline": [],
        },
        {"title": "2. Auto", "html": "<h1>2. Auto</h1>", "answers": [], "styles": [], "inline": []},
    ]
    html = pdf._combined(pieces, {0: 3, 1: 9})
    assert '<a href="#sb-pdf-0">1. Meshes</a><span class="sb-pdf-dots"></span><span>3</span>' in html
    assert '<h2>Pop quiz answers</h2><div>A1</div></section></section><section class="sb-pdf-chapter' in html
    assert html.count("Pop quiz answers") == 1 and "white-space: pre-wrap" in html
    assert '<link rel="stylesheet" href="http://x/_static/a.css">' in html
