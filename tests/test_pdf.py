"""tools/pdf.py's pieces that need no browser (make pdf-check prints and reads back the real book)."""

from __future__ import annotations

import pytest

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


def _printed(*drawings: bytes | None) -> bytes:
    """A PDF of 100-point pages, each drawn by its content stream (None: a blank page)."""
    import io

    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject

    writer = PdfWriter()
    for drawing in drawings:
        page = writer.add_blank_page(100, 100)
        if drawing is not None:
            stream = DecodedStreamObject()
            stream.set_data(drawing)
            page.replace_contents(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_the_outline_keeps_the_printed_pages_so_their_text_is_read_once():
    # Property: make pdf-check reads the first printing's text once and checks the outlined PDF with
    # it; that holds only while the outline leaves every page's drawing as printed, which same_pages
    # tells apart from a page drawn otherwise, a page more or a page less.
    first = _printed(b"0 0 m 10 10 l S", None, b"0 0 m 20 20 l S")
    outlined = pdf.with_outline(first, ["One", "Two"], {0: 1, 1: 3})
    assert outlined != first and pdf.same_pages(outlined, first)
    assert not pdf.same_pages(_printed(b"0 0 m 10 10 l S", None, b"0 0 m 30 30 l S"), first)
    assert not pdf.same_pages(_printed(b"0 0 m 10 10 l S", None), first)
    assert not pdf.same_pages(_printed(b"0 0 m 10 10 l S", None, b"0 0 m 20 20 l S", None), first)


def test_chapter_pages_are_the_pages_their_titles_open_past_the_contents():
    # Property: the table of contents (it lists every title) is skipped; a chapter's page is the first
    # after the previous chapter's whose text opens with its title, not one that only mentions it.
    mention = "the text of chapter 1 goes on, and names 2. auto"  # past its first 40 characters
    texts = ["cover", "contents 1. meshes 2. auto 3. explicit", "1. meshes text", mention,
             "2. auto text", "3. explicit text"]  # fmt: skip
    assert pdf.chapter_pages(texts, ["1. Meshes", "2. Auto", "3. Explicit"]) == {0: 3, 1: 5, 2: 6}


def _printed_text(*lines: str | None) -> bytes:
    """A PDF whose pages each show one line of text in Helvetica (None: a blank page)."""
    import io

    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for line in lines:
        page = writer.add_blank_page(300, 100)
        if line is not None:
            fonts = DictionaryObject({NameObject("/F1"): font})
            page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
            stream = DecodedStreamObject()
            stream.set_data(f"BT /F1 12 Tf 10 50 Td ({line}) Tj ET".encode())
            page.replace_contents(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_page_texts_has_one_text_per_page_blank_pages_too_in_order():
    # Property: the i-th text is the i-th page's (chapter_pages counts pages by it), a blank page
    # gives an empty text, and texts are compared flat (_flat: one space, lower case).
    texts = pdf.page_texts(_printed_text("1. Meshes  and   MORE", None, "2. Auto"))
    assert texts == ["1. meshes and more", "", "2. auto"]


def test_page_texts_without_pdftotext_names_the_package(monkeypatch):
    # Property: a machine without poppler's pdftotext is told what to install, not shown a traceback
    # from deep inside subprocess.
    monkeypatch.setattr(pdf, "PDFTOTEXT", "no-such-pdftotext")
    with pytest.raises(RuntimeError, match="apt-get install poppler-utils"):
        pdf.page_texts(_printed_text("x"))
