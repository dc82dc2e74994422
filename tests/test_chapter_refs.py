"""tools/chapter_refs.py: chapters are named by page, and the reader sees the number of the page's title."""

import nbformat
import pytest
import yaml

from tests.notebooks import ROOT, sphinx_page
from tools import chapter_refs
from tools import notebooks as nbtools


def test_the_number_comes_from_the_pages_title():
    assert chapter_refs.label("03_explicit_sharding") == "Chapter 3"
    assert chapter_refs.label("10_memory", "chapter") == "chapter 10"
    assert chapter_refs.label("appendix_reading_the_compiled_program") == "Appendix A"
    assert chapter_refs.label("simulated_devices", "appendix") == "appendix B"
    text = "See {chapter}`chapter <04_manual_sharding>` and {chapter}`simulated_devices`'s list."
    assert chapter_refs.plain(text) == "See chapter 4 and Appendix B's list."


def test_a_role_broken_across_lines_is_read_as_the_build_reads_it():
    # regression: "{chapter}`chapter\n<09_precision>`" passed the source check and failed the build
    assert chapter_refs.plain("one pass, {chapter}`chapter\n<10_memory>`.") == "one pass, chapter 10."
    with pytest.raises(chapter_refs.UnknownChapter, match="book/ has no 09_precision.md"):
        chapter_refs.plain("one pass, {chapter}`chapter\n<09_precision>`.")


def test_a_converted_notebooks_words_become_roles_and_back():
    # tools/notebooks.py convert_to_source: a notebook written as .ipynb gets a source with roles.
    text = "As Chapter 3 says (and chapter 10, Appendix A). Not Chapter 99, Chapter 3.5 or chapters 0 and 10."
    roles = chapter_refs.as_roles(text)
    assert roles == (
        "As {chapter}`03_explicit_sharding` says (and {chapter}`chapter <10_memory>`, "
        "{chapter}`appendix_reading_the_compiled_program`). Not Chapter 99, Chapter 3.5 or chapters 0 and 10."
    )
    assert chapter_refs.plain(roles) == text


@pytest.mark.parametrize(
    "target, word, message",
    [
        ("03_explicit", None, "book/ has no 03_explicit.md"),
        ("intro", None, "has no number"),  # the landing page is not a numbered page
        ("simulated_devices", "chapter", "simulated_devices is Appendix B"),
        ("03_explicit_sharding", "appendix", "03_explicit_sharding is Chapter 3"),
    ],
)
def test_a_role_naming_no_numbered_page_is_refused(target, word, message):
    with pytest.raises(chapter_refs.UnknownChapter, match=message):
        chapter_refs.label(target, word)


def test_no_source_types_a_chapters_number():
    # Property: a renumbering cannot leave a stale reference. Every chapter or appendix the book's
    # pages and the assignments name, in prose or in code, is named by page; each role names a page.
    sources = nbtools.chapter_sources() + nbtools.solution_sources() + [ROOT / "book" / "intro.md"]
    typed, roles = {}, 0
    for source in sources:
        text = source.read_text()
        if found := chapter_refs.typed_references(text):
            typed[source.relative_to(ROOT).as_posix()] = found
        roles += len(chapter_refs.ROLE.findall(text))
        chapter_refs.plain(text)  # every role names a numbered page
    assert not typed, typed
    assert roles > 50  # the check reads the roles it should
    assert chapter_refs.typed_references("as Chapter 3 and chapters 0 and 10, Ch. 2, Appendix A said") == [
        "Chapter 3",
        "chapters 0",
        "Ch. 2",
        "Appendix A",
    ]
    assert chapter_refs.typed_references('<img alt="after 1, chapters 2 and 9">') == []  # a picture's words


def test_generated_notebooks_write_the_words():
    # Colab and Jupyter do not render MyST roles: the .ipynb generated from a source says "Chapter 3".
    source = ROOT / "solutions" / "03_explicit_sharding" / "03_explicit_sharding.md"
    markdown = "".join(c.source for c in nbtools.source_notebook(source).cells if c.cell_type == "markdown")
    assert "goes with Chapter 3, " in markdown and "{chapter}" not in markdown


def test_the_book_loads_the_extension():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert "tools.chapter_refs" in config["local_extensions"]
    assert "tools.chapter_refs" in config["config"]["extensions"]


def test_a_built_page_links_the_chapter_and_warns_about_an_unknown_one(tmp_path):
    # A tiny Sphinx build: a page beside a copy of chapter 3's title.
    (tmp_path / "03_explicit_sharding.md").write_text("# 3. Explicit sharding\n\nText.\n")
    text = "# A page\n\nAs {chapter}`chapter <03_explicit_sharding>` says; {chapter}`99_nothing` does not."
    old_book = chapter_refs.BOOK
    chapter_refs.BOOK = tmp_path
    chapter_refs.number.cache_clear()
    try:
        html, warnings = sphinx_page(tmp_path, [nbformat.v4.new_markdown_cell(text)], "tools.chapter_refs")
    finally:
        chapter_refs.BOOK = old_book
        chapter_refs.number.cache_clear()
    assert "book/ has no 99_nothing.md" in warnings
    assert 'href="03_explicit_sharding.html"' in html
    assert ">chapter 3</span></a>" in html
