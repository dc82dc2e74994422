"""Chapters as MyST Markdown and each chapter executed once: tools/notebooks.py sources and run's
cache, tools/execution_cache.py and tools/chapter_sources.py. Assignments' sources: test_sources.py."""

import re
import types

import nbformat
import pytest
import yaml
from jupyter_cache.base import CacheBundleIn
from myst_nb.core.read import read_myst_markdown_notebook
from myst_parser.config.main import MdParserConfig

from grading.assignment import grade_id
from tests.notebooks import ROOT
from tools import chapter_refs, chapter_sources, execution_cache
from tools import notebooks as nbtools

CHAPTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A chapter

```{code-cell}
---
mystnb:
  image:
    alt: A picture.
tags: [hide-input]
---
print(6 * 7)
```

+++ {"nbgrader": {"grade": false, "grade_id": "intro", "locked": true}}

Prose with metadata.
"""


def _book(tmp_path, monkeypatch, text=CHAPTER):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "ch.md").write_text(text)
    (tmp_path / "book" / "intro.md").write_text("# Not a notebook\n")
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    return tmp_path / "book" / "ch.md"


def _cells(nb):
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]


def _toc_files(entry) -> list[str]:
    if isinstance(entry, dict):  # an entry's file, and those of its sections
        files = [entry["file"]] if "file" in entry else []
        return files + [f for v in entry.values() for f in _toc_files(v)]
    return [f for v in entry for f in _toc_files(v)] if isinstance(entry, list) else []


def test_every_chapter_is_a_md_source_with_its_generated_notebook():
    sources = nbtools.chapter_sources()
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = {ROOT / f"{f}.md" for f in _toc_files(toc) if f.startswith("book/")}
    assert toc["root"] == "book/intro" and ROOT / "book" / "intro.md" not in sources
    assert pages and pages == set(sources), "each chapter in _toc.yml is a MyST notebook source in book/"
    for source in sources:
        # The book renders what myst-nb reads from the .md; Colab opens the .ipynb: the same cells.
        as_built = read_myst_markdown_notebook(source.read_text(), MdParserConfig())
        for cell in as_built.cells:  # Colab's copy names chapters in words (tools/chapter_refs.py)
            if cell.cell_type == "markdown":
                cell.source = chapter_refs.plain(cell.source)
        assert _cells(as_built) == _cells(nbformat.read(source.with_suffix(".ipynb"), as_version=4))


def test_chapter_notebook_keeps_metadata_and_derives_ids(tmp_path, monkeypatch):
    source = _book(tmp_path, monkeypatch)
    nb = nbtools.source_notebook(source)
    nbformat.validate(nb)
    assert dict(nb.metadata) == {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
    }
    # The notebook's name and the cell's position; a cell with an nbgrader grade_id is called by it.
    assert [c.id for c in nb.cells] == ["ch-000", "ch-001", "intro"]
    assert nb.cells[1].metadata == {"mystnb": {"image": {"alt": "A picture."}}, "tags": ["hide-input"]}
    assert grade_id(nb.cells[2]) == "intro"
    # The page the book builds is read by myst-nb: the same cells, sources and metadata.
    assert _cells(read_myst_markdown_notebook(source.read_text(), MdParserConfig())) == _cells(nb)


def test_a_chapter_is_what_myst_nb_reads_as_a_notebook(tmp_path, monkeypatch):
    source = _book(tmp_path, monkeypatch)
    (tmp_path / "book" / "mystnb.md").write_text("---\nfile_format: mystnb\n---\n# Notebook\n")
    (tmp_path / "book" / "page.md").write_text("---\nkernelspec:\n  name: python3\n---\n# A page\n")
    assert nbtools.chapter_sources() == [source, tmp_path / "book" / "mystnb.md"]


def test_chapters_check_fails_on_drift_and_on_a_notebook_without_source(tmp_path, monkeypatch, capsys):
    source = _book(tmp_path, monkeypatch)
    with pytest.raises(SystemExit):
        nbtools.cmd_sources(types.SimpleNamespace(check=True))  # no .ipynb yet
    assert "book/ch.ipynb disagree" in capsys.readouterr().err
    nbtools.cmd_sources(types.SimpleNamespace(check=False))
    nbtools.cmd_sources(types.SimpleNamespace(check=True))
    source.write_text(CHAPTER.replace("print(6 * 7)", "print(6 * 8)"))
    with pytest.raises(SystemExit):
        nbtools.cmd_sources(types.SimpleNamespace(check=True))
    assert "run `make sources`" in capsys.readouterr().err
    nbtools.cmd_sources(types.SimpleNamespace(check=False))
    (tmp_path / "book" / "orphan.ipynb").write_text(nbtools.notebook_text(nbtools.source_notebook(source)))
    with pytest.raises(SystemExit):
        nbtools.cmd_sources(types.SimpleNamespace(check=True))
    assert "orphan.ipynb" in capsys.readouterr().err


def _executed(nb):
    done = nbformat.from_dict(dict(nb))
    done.metadata = {**nb.metadata, "language_info": {"name": "python", "pygments_lexer": "ipython3"}}
    done.cells = []
    for cell in nb.cells:
        cell = nbformat.from_dict(dict(cell))
        if cell.cell_type == "code":
            cell.metadata = {**cell.metadata, "papermill": {"duration": 1.0}}  # papermill adds its own
            cell.execution_count = 1
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
        done.cells.append(cell)
    return done


def test_run_caches_outputs_under_the_key_the_book_build_looks_up(tmp_path, monkeypatch):
    source = _book(tmp_path, monkeypatch)
    cache = execution_cache.open_cache(tmp_path / "cache", "key")
    nb = nbtools.source_notebook(source)
    assert execution_cache.cached_outputs(cache, nb) is None
    nbtools._cache_chapter(cache, source, nb, _executed(nbtools.source_notebook(source)), 1.0)
    as_built = read_myst_markdown_notebook(source.read_text(), MdParserConfig())
    merged = execution_cache.cached_outputs(cache, as_built)
    assert merged.cells[1].outputs[0]["text"] == "42\n"
    assert merged.metadata["language_info"]["pygments_lexer"] == "ipython3"
    # An edited code cell is a different notebook: the build executes it rather than show old outputs.
    edited = read_myst_markdown_notebook(source.read_text().replace("6 * 7", "6 * 8"), MdParserConfig())
    assert execution_cache.cached_outputs(cache, edited) is None


def test_a_change_to_the_helper_package_empties_the_cache(tmp_path):
    for name in ("requirements.txt", "pyproject.toml"):
        (tmp_path / name).write_text("jax==0.12.0.1\n")
    (tmp_path / "shardbook" / "__pycache__").mkdir(parents=True)
    (tmp_path / "shardbook" / "comms.py").write_text("X = 1\n")
    key = execution_cache.dependency_key(tmp_path)
    (tmp_path / "shardbook" / "__pycache__" / "comms.cpython-312.pyc").write_bytes(b"\0")
    assert execution_cache.dependency_key(tmp_path) == key  # compiled files are not sources
    (tmp_path / "shardbook" / "comms.py").write_text("X = 2\n")
    changed = execution_cache.dependency_key(tmp_path)
    assert changed != key
    (tmp_path / "shardbook" / "comms.py").write_text("X = 1\n")
    (tmp_path / "requirements.txt").write_text("jax==0.12.1\n")
    assert execution_cache.dependency_key(tmp_path) not in (key, changed)

    path = tmp_path / "cache"
    cache = execution_cache.open_cache(path, key)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1", execution_count=1)])

    cache.cache_notebook_bundle(CacheBundleIn(nb, "x.md"), check_validity=False)
    assert execution_cache.cached_outputs(execution_cache.open_cache(path, key), nb) is not None
    assert execution_cache.cached_outputs(execution_cache.open_cache(path, changed), nb) is None
    assert (path / execution_cache.STAMP).read_text().strip() == changed


def test_the_build_rereads_notebook_pages_when_the_dependencies_changed():
    env = types.SimpleNamespace(
        found_docs={"book/ch", "book/intro", "book/new"},
        metadata={"book/ch": {"kernelspec": {}}, "book/intro": {}, "book/new": {"kernelspec": {}}},
        shardbook_dependency_key_now="new",
    )
    outdated = execution_cache._env_get_outdated
    assert outdated(None, env, {"book/new"}, set(), set()) == []  # a fresh environment reads everything
    env.shardbook_dependency_key = "new"
    assert outdated(None, env, {"book/new"}, set(), set()) == []
    env.shardbook_dependency_key = "old"
    assert outdated(None, env, {"book/new"}, set(), set()) == ["book/ch"]
    execution_cache._env_updated(None, env)
    assert env.shardbook_dependency_key == "new"


def test_a_chapter_page_offers_its_committed_notebook(tmp_path):
    (tmp_path / "book").mkdir()
    for name in ("ch.md", "ch.ipynb", "intro.md", "ex.ipynb"):
        (tmp_path / "book" / name).write_text(name)
    env = types.SimpleNamespace(
        found_docs={"book/ch", "book/intro", "book/ex"},
        doc2path=lambda page: (
            tmp_path / {"book/ch": "book/ch.md", "book/intro": "book/intro.md"}.get(page, "book/ex.ipynb")
        ),
    )
    app = types.SimpleNamespace(env=env)
    for page, sourcename, suffix in [
        ("book/ch", "book/ch.ipynb", ".ipynb"),
        ("book/intro", "book/intro.md", ".md"),
        ("book/ex", "book/ex.ipynb", ".ipynb"),
    ]:
        context = {"sourcename": page + (".md" if page != "book/ex" else ".ipynb"), "page_source_suffix": "x"}
        chapter_sources._page_context(app, page, "page.html", context, None)
        assert context["sourcename"] == sourcename
        assert context["page_source_suffix"] == (suffix if page == "book/ch" else "x")
    # Sphinx copied the .md under the .ipynb's name; the build's end puts the committed notebook there.
    (tmp_path / "html" / "_sources" / "book").mkdir(parents=True)
    (tmp_path / "html" / "_sources" / "book" / "ch.ipynb").write_text("ch.md")
    app.outdir = tmp_path / "html"
    app.builder = types.SimpleNamespace(format="html")
    app.config = types.SimpleNamespace(html_copy_source=True)
    chapter_sources._build_finished(app, None)
    assert (tmp_path / "html" / "_sources" / "book" / "ch.ipynb").read_text() == "ch.ipynb"
    assert not (tmp_path / "html" / "_sources" / "book" / "ex.ipynb").exists()


COMPANION_IMPORT = re.compile(r"^\s*(?:import|from)\s+(flax|optax|orbax)\b", re.M)
COMPANION_PIP = re.compile(r"pip install\b[^`\n]*\b(flax|optax|orbax)", re.I)


@pytest.mark.parametrize(
    "page",
    sorted((ROOT / "book").glob("*.md")),
    ids=lambda p: p.stem,
)
def test_one_sentence_says_how_to_install_flax_optax_and_orbax(page):
    # Every page that imports Flax, Optax or Orbax says how to install them in the one sentence of
    # shardbook.setup.COMPANIONS_ADVICE (the pins spelled once), and no page gives another pip command.
    from shardbook.setup import COMPANIONS_ADVICE

    text = page.read_text()
    prose = " ".join(text.split())
    if COMPANION_IMPORT.search(text):
        assert COMPANIONS_ADVICE in prose, f"{page.name} uses {COMPANION_IMPORT.search(text).group(1)}"
    others = COMPANION_PIP.findall(prose.replace(COMPANIONS_ADVICE, ""))
    assert not others, f"{page.name} says another way to install {others}: use COMPANIONS_ADVICE"


def test_chapters_spell_each_helper_name_flat():
    # One public spelling per name: a chapter's code uses shardbook.X or `from shardbook import X`, X a
    # name shardbook exports (never a module of it, never `from shardbook.<module> import`).
    import shardbook

    problems = []
    for source in nbtools.chapter_sources():
        code = "\n".join(c.source for c in nbtools._read_source(source).cells if c.cell_type == "code")
        for line in re.findall(r"^.*\bfrom shardbook\.\w+ import.*$", code, re.M):
            problems.append(f"{source.name}: {line.strip()}")
        names = re.findall(r"\bshardbook\.(\w+)", code)
        imports = re.findall(r"^\s*from shardbook import (?:\(([^)]*)\)|([^(\n]+))$", code, re.M)
        for imported in (a or b for a, b in imports):
            names += [n.split("#")[0].strip() for n in imported.replace("\n", ",").split(",")]
        names = [n for n in names if n]
        problems += [f"{source.name}: shardbook.{n}" for n in names if n not in shardbook.__all__]
    assert not problems, "spell these `from shardbook import X` (export X there):\n" + "\n".join(problems)


def _title(source) -> str:
    """A page's H1, the title the sidebar, the page and the browser tab show."""
    text = source.read_text()
    return re.search(r"^# (.+)$", text.split("\n---\n", 1)[-1], re.M).group(1)


def test_chapter_and_assignment_numbers_line_up():
    # Property: a reader sees chapter N's number in its title, and Assignment N is chapter N's: its
    # folder, title, exercise numbers, grader, the chapter's link to it and the landing page's table
    # all say N. Chapters 0 and 10 have no assignment; the appendices are A, B and C, in the sidebar's order.
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = {int(p.stem[:2]): p for p in nbtools.chapter_sources() if p.stem[:2].isdigit()}
    for n, source in chapters.items():
        assert _title(source).startswith(f"{n}. "), f"{source.name}'s title must start with '{n}. '"
    appendix = next(part for part in toc["parts"] if part["caption"] == "Appendix")
    for letter, entry in zip("ABC", appendix["chapters"], strict=True):
        page = ROOT / f"{entry['file']}.md"
        assert _title(page).startswith(f"{letter}. "), f"{page.name}'s title must start with '{letter}. '"
    intro = (ROOT / "book" / "intro.md").read_text()
    assignments, headings = {}, set()
    for folder in sorted((ROOT / "solutions").iterdir()):
        n, name = int(folder.name[:2]), folder.name
        assignments[n] = name
        assert n in chapters, f"solutions/{name}: no chapter {n} to go with"
        source = folder / f"{name}.md"
        assert _title(source).startswith(f"Assignment {n} — "), (
            f"{name}.md: its title must say Assignment {n}"
        )
        text = source.read_text()
        said = f"goes with {{chapter}}`{chapters[n].stem}`, "
        assert said in text, f"{name}.md: its intro must say it goes with chapter {n}: '{said}'"
        numbers = re.findall(r"^#+ Exercise ((\d+)\.\d+) ", text, re.M)
        assert numbers and {m for _, m in numbers} == {str(n)}, f"{name}.md: number its exercises {n}.k"
        headings.update(k for k, _ in numbers)
        assert (ROOT / "grading" / "graders" / f"a{name}.py").is_file(), f"no grading/graders/a{name}.py"
        link = f"../exercises/{name}/{name}.ipynb"
        assert link in chapters[n].read_text(), f"{chapters[n].name} must link its assignment {link}"
        assert re.search(rf"^\| \[{n}\. [^\n]*\[{name}\]\({re.escape(link)}\) \|$", intro, re.M), name
    assert set(chapters) - set(assignments) == {0, 10}, "chapters 0 and 10 alone have no assignment"
    # Every "Assignment N" a page links goes to assignment N, and every "Exercise N.k" it names exists.
    for page in sorted((ROOT / "book").glob("*.md")):
        text = page.read_text()
        for n, target in re.findall(r"\[Assignment (\d+)\b[^\]]*\]\(\.\./exercises/(\d+)_", text):
            assert n == target.lstrip("0"), f"{page.name}: 'Assignment {n}' links assignment {target}"
        for number in re.findall(r"\b[Ee]xercises? (\d+\.\d+)\b", text):
            assert number in headings, f"{page.name} names Exercise {number}, which no assignment has"


def _quiz_notebook(check_tags=(), prose_after="The folded cell below checks it:", dropdown=True):
    """A chapter with one pop quiz (answer: 64 MiB per device, `psum_scatter`), its check cell,
    and a later section that may print anything."""
    cls = ":class: dropdown\n" if dropdown else ""
    cells = [
        nbformat.v4.new_markdown_cell(
            "## Blocks\n\n**Pop quiz.** A `float32[16384, 8192]` matrix is laid out `P('X', 'Y')` on"
            " the 4 × 2 mesh. How many bytes per device, and which collective sums it?\n\n"
            f"```{{admonition}} Answer\n{cls}4096 × 4096 × 4 bytes = 67,108,864 bytes, 64 MiB; a "
            f"`psum_scatter`.\n```\n\n{prose_after}"
        ),
        nbformat.v4.new_code_cell(
            "block = (4096, 4096)\nprint(block, 'MiB:', 4096 * 4096 * 4 / 2**20)",
            metadata={"tags": list(check_tags)} if check_tags else {},
            outputs=[nbformat.v4.new_output("stream", text="(4096, 4096) MiB: 64.0\n")],
        ),
        nbformat.v4.new_code_cell(
            "print('the question again: 16384 x 8192 on 4 x 2')",
            outputs=[nbformat.v4.new_output("stream", text="the question again: 16384 x 8192\n")],
        ),
        nbformat.v4.new_markdown_cell("## Next section\n\nNow that it is answered:"),
        nbformat.v4.new_code_cell(
            "print('64 MiB by psum_scatter')",
            outputs=[nbformat.v4.new_output("stream", text="64 MiB by psum_scatter\n")],
        ),
    ]
    return nbformat.v4.new_notebook(cells=cells)


def test_a_quiz_answer_shown_outside_its_fold_is_found():
    # Property: between a pop quiz's question and the next heading, what the page shows outside the
    # answer's dropdown (prose, unhidden code, unhidden output) states none of the answer's figures or
    # code terms; a cell that checks the answer is folded (hide-cell). Figures of the question, and
    # anything after the next heading, are free to show.
    from tools import quizzes

    spoiled = quizzes.spoilers(_quiz_notebook())
    assert len(spoiled) == 2, spoiled
    assert "cell 1's code shows its answer (4096)" in spoiled[0]
    assert "cell 1's output shows its answer (4096, 64.0)" in spoiled[1]
    assert quizzes.spoilers(_quiz_notebook(check_tags=["hide-cell"])) == []
    assert quizzes.spoilers(_quiz_notebook(check_tags=["remove-input", "remove-output"])) == []
    only_output_hidden = quizzes.spoilers(_quiz_notebook(check_tags=["hide-output"]))
    assert [s.split(": ")[1][:32] for s in only_output_hidden] == ["cell 1's code shows its answer ("]
    prose = quizzes.spoilers(
        _quiz_notebook(check_tags=["hide-cell"], prose_after="The `psum_scatter` sends 64 MiB:")
    )
    assert len(prose) == 1 and "cell 0's prose shows its answer (64, 64 MiB, psum_scatter)" in prose[0]
    unfolded = quizzes.spoilers(_quiz_notebook(check_tags=["hide-cell"], dropdown=False))
    assert unfolded == [
        "the pop quiz of cell 0 has no folded answer (```{admonition} Answer + :class: dropdown)"
    ]


@pytest.mark.parametrize("source", nbtools.chapter_sources(), ids=lambda p: p.stem)
def test_no_pop_quiz_shows_its_answer_outside_its_fold(source):
    # Property: every pop quiz of a chapter is found, has a folded answer, and nothing the page shows
    # around it (prose, code of a cell not folded) gives the answer away; their outputs are checked on
    # the executed chapters by `tools/notebooks.py prose`.
    from tools import quizzes

    nb = nbtools._read_source(source)
    text = source.read_text()
    asked = len(re.findall(r"^\*\*Pop quiz\.\*\*|^#+ Pop quiz\s*$", text, re.M))
    assert len(quizzes.find_quizzes(nb)) == asked, f"{source.name}: a pop quiz the check does not see"
    assert quizzes.spoilers(nb) == []


def test_unfolding_a_chapter_quiz_check_is_a_failure():
    # The bad case on a real chapter: chapter 1's quiz check cells without their hide-cell tag.
    from tools import quizzes

    nb = nbtools._read_source(ROOT / "book" / "01_devices_meshes_shardings.md")
    checks = [c for c in nb.cells if "hide-cell" in c.metadata.get("tags", []) and "shard_shape" in c.source]
    assert len(checks) == 2
    for cell in checks:
        cell.metadata["tags"] = []
    assert len(quizzes.spoilers(nb)) == 2


def test_the_notation_is_written_one_way_in_plain_text():
    # Property: the scaling book's notation (A[B_X, D_Y], Out[B_X, F]{U_Y}) is plain text in every
    # chapter's prose: no MathJax ($A[B_X]$ renders in another font, or as raw text where math is
    # off) and no TeX subscript braces (D_{k} shows its braces), so a page reads as its neighbours do.
    problems = []
    for source in nbtools.chapter_sources():
        code = False
        for number, line in enumerate(source.read_text().splitlines(), 1):
            if line.startswith("```{code-cell}"):
                code = True
            elif code and line.startswith("```"):
                code = False
            elif not code and (re.search(r"\$[^$\s][^$]*\$", line) or re.search(r"\b[A-Za-z]_\{", line)):
                problems.append(f"{source.name}:{number}: {line.strip()}")
    assert not problems, "write the notation as plain text, A[B_X, D_Y]:\n" + "\n".join(problems)
