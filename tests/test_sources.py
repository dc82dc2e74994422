"""Assignments as MyST Markdown sources (tools/notebooks.py sources, convert_to_source), the points
check, and issue 15's "done when": a one-sentence edit is a diff of a few readable lines."""

import difflib
import shutil
import types

import nbformat
import pytest

from grading.assignment import grade_id
from tests.notebooks import ROOT, assignment_notebook
from tools import notebooks as nbtools

ASSIGNMENT = "01_meshes"
# One sentence of the assignment's intro and one of chapter 1, each on one line of its source.
ASSIGNMENT_SENTENCE = (
    "Nothing here needs more than the first chapter, NumPy and a pencil.",
    "Bring a pencil.",
)
CHAPTER = "01_devices_meshes_shardings"
CHAPTER_SENTENCE = ("Every notebook of the book starts with the same setup cell:", "Each notebook opens so:")


def _cells(nb):
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]


def test_every_assignment_is_a_md_source_with_its_generated_notebook():
    # Each solutions/<a>/ holds its source <a>.md and the .ipynb generated from it, which nbgrader,
    # grading and the tests read: same cells, and ids that are the cells' grade_ids.
    folders = sorted(p for p in (ROOT / "solutions").iterdir() if p.is_dir())
    assert len(folders) >= 9
    for folder in folders:
        source = folder / f"{folder.name}.md"
        assert sorted(p.name for p in folder.iterdir()) == sorted([source.name, f"{folder.name}.ipynb"]), (
            folder
        )
        generated = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
        assert source.with_suffix(".ipynb").read_text() == nbtools.notebook_text(
            nbtools.source_notebook(source)
        )
        assert [c.id for c in generated.cells] == [grade_id(c) for c in generated.cells]
        assert source in nbtools.solution_sources()


def _changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def _course(tmp_path, monkeypatch):
    """A scratch course holding assignment 1's source, and the nbgrader configuration."""
    (tmp_path / "solutions" / ASSIGNMENT).mkdir(parents=True)
    (tmp_path / "grading").mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    shutil.copy(ROOT / "grading" / "nbgrader_config.py", tmp_path / "grading")
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    return tmp_path / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.md"


def test_a_one_sentence_edit_to_an_assignment_is_a_one_line_diff(tmp_path, monkeypatch):
    # Issue 15, done when: edit one sentence of solutions/01_meshes/01_meshes.md; what `make exercises`
    # then writes (the .ipynb from the .md, exercises/ from that) changes that one line in each file.
    committed = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.md"
    source = _course(tmp_path, monkeypatch)
    old, new = ASSIGNMENT_SENTENCE
    assert committed.read_text().count(old) == 1
    source.write_text(committed.read_text().replace(old, new))
    nbtools.cmd_sources(types.SimpleNamespace(check=False))
    nbtools.generate_exercises(tmp_path / "exercises")
    assert sorted(p.name for p in (tmp_path / "exercises" / ASSIGNMENT).iterdir()) == [f"{ASSIGNMENT}.ipynb"]
    for path in (f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.md", f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
                 f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"):  # fmt: skip
        changed = _changed_lines((ROOT / path).read_text(), (tmp_path / path).read_text())
        # The line as it was and as it is now; in the exercise also nbgrader's checksum of the locked cell.
        checksums = [line for line in changed if '"checksum": ' in line]
        sentence = [line for line in changed if line not in checksums]
        assert len(sentence) == 2 and old in sentence[0] and new in sentence[1], (path, changed)
        assert len(checksums) == (2 if path.startswith("exercises") else 0), (path, changed)


def test_a_one_sentence_edit_to_a_chapter_is_a_one_line_diff(tmp_path, monkeypatch):
    committed = ROOT / "book" / f"{CHAPTER}.md"
    (tmp_path / "book").mkdir()
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    old, new = CHAPTER_SENTENCE
    assert committed.read_text().count(old) == 1
    (tmp_path / "book" / committed.name).write_text(committed.read_text().replace(old, new))
    nbtools.cmd_sources(types.SimpleNamespace(check=False))
    for name in (f"{CHAPTER}.md", f"{CHAPTER}.ipynb"):
        changed = _changed_lines((ROOT / "book" / name).read_text(), (tmp_path / "book" / name).read_text())
        assert len(changed) == 2 and old in changed[0] and new in changed[1], (name, changed)


def _solution_notebook() -> nbformat.NotebookNode:
    """Assignment 1 as a helper writes a new assignment today: .ipynb with random ids, language_info,
    an output, a blank line at a cell's end."""
    nb = nbformat.read(ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        cell.id = nbformat.v4.new_code_cell().id
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="8 devices\n")]
    nb.cells[2].source += "\n\n"
    return nb


def test_convert_to_source_writes_the_md_and_regenerates_the_notebook(tmp_path, monkeypatch, capsys):
    source = _course(tmp_path, monkeypatch)
    written = _solution_notebook()
    nbformat.write(written, source.with_suffix(".ipynb"))
    with pytest.raises(
        SystemExit
    ):  # a notebook without its source is stale, and the message says what to run
        nbtools.cmd_sources(types.SimpleNamespace(check=True))
    assert "--from-ipynb" in capsys.readouterr().err
    nbtools.cmd_sources(types.SimpleNamespace(check=False, from_ipynb=[ASSIGNMENT]))
    nbtools.cmd_sources(types.SimpleNamespace(check=True))
    generated = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    committed = nbformat.read(ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    # Every cell's type, text and nbgrader metadata survive; outputs, language_info and the trailing blank
    # lines do not; the ids are the grade_ids, as in the committed assignment.
    assert _cells(generated) == _cells(committed) and generated.metadata == committed.metadata
    assert (
        source.with_suffix(".ipynb").read_text()
        == (ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    )
    assert source.read_text() == (ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.md").read_text()
    with pytest.raises(SystemExit):  # the .md is the source now: converting again would overwrite edits
        nbtools.convert_to_source(source.with_suffix(".ipynb"))
    assert "exists already" in capsys.readouterr().err


def test_convert_to_source_refuses_a_notebook_markdown_cannot_hold(tmp_path, monkeypatch, capsys):
    source = _course(tmp_path, monkeypatch)
    nb = _solution_notebook()
    nb.cells[0].source += "\n+++\nA line that MyST Markdown reads as a cell break."
    nbformat.write(nb, source.with_suffix(".ipynb"))
    before = source.with_suffix(".ipynb").read_text()
    with pytest.raises(SystemExit):
        nbtools.convert_to_source(source.with_suffix(".ipynb"))
    assert "cell [0] would not survive" in capsys.readouterr().err
    assert not source.exists() and source.with_suffix(".ipynb").read_text() == before


def test_duplicate_grade_ids_are_refused(tmp_path, monkeypatch, capsys):
    source = _course(tmp_path, monkeypatch)
    text = (ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.md").read_text()
    source.write_text(text.replace("grade_id: imports", "grade_id: setup"))
    with pytest.raises(SystemExit):
        nbtools.source_notebook(source)
    assert "['setup'] occur twice" in capsys.readouterr().err


def test_exercise_check_and_leak_scan_see_files_other_than_notebooks(tmp_path, monkeypatch, capsys):
    # nbgrader copies an assignment folder's other files into the release: a .md source there would
    # publish the solutions. The exercises check compares every file; the leak scan reads them all.
    for name in ("solutions", "exercises"):
        shutil.copytree(ROOT / name / ASSIGNMENT, tmp_path / name / ASSIGNMENT)
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    stray = tmp_path / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.md"
    shutil.copy(tmp_path / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.md", stray)
    monkeypatch.setattr(
        nbtools,
        "generate_exercises",
        lambda into: shutil.copytree(ROOT / "exercises" / ASSIGNMENT, into / ASSIGNMENT),
    )
    with pytest.raises(SystemExit):
        nbtools.cmd_exercises(types.SimpleNamespace())
    assert f"{ASSIGNMENT}.md" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))
    assert f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.md: solution/hidden line" in capsys.readouterr().err


def test_points_stated_where_no_check_compares_them_are_problems():
    good = assignment_notebook("Points: 3 in all.", [("### Exercise 7.1 — A (3 points)", [1, 2])])
    assert nbtools.points_problems(good, "a.ipynb") == ([], {"7.1": 3})
    # A heading without "(P points)" would count its tests into the exercise before it.
    no_points = assignment_notebook(
        "Points: 5 in all.", [("### Exercise 7.1 — A (3 points)", [1, 2]), ("### Exercise 7.2 — B", [2])]
    )
    problems, _ = nbtools.points_problems(no_points, "a.ipynb")
    assert "the heading '### Exercise 7.2 — B' must end with '(P points)'" in problems[0]
    worth = assignment_notebook(
        "Points: 3 in all. The self-check is worth 1 point.", [("### Exercise 7.1 — A (3 points)", [1, 2])]
    )
    problems, _ = nbtools.points_problems(worth, "a.ipynb")
    assert problems == [
        "a.ipynb: 'Points: 3 in all. The self-check is worth 1 point.' states points where no check compares"
        " them with the metadata; say them only in the intro's 'Points: N in all' and the exercise headings"
    ]
    abbreviated = assignment_notebook("Points: 3 in all.", [("### Exercise 7.1 — A (3 pts)", [1, 2])])
    assert "must end with '(P points)'" in nbtools.points_problems(abbreviated, "a.ipynb")[0][0]


def test_book_pages_state_points_only_where_they_are_checked(tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, tmp_path / "solutions" / ASSIGNMENT)
    (tmp_path / "book").mkdir()
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    page = tmp_path / "book" / "intro.md"
    page.write_text("# Intro\n\nAssignment 1 (14 points) and Exercise 1.3 (4 points) start here.\n")
    nbtools.cmd_points(types.SimpleNamespace())
    assert "1 assignments; intros, headings and 1 book pages agree" in capsys.readouterr().out
    for text, message in [
        (
            "Assignment 01 — Meshes (15 points)",
            "says Assignment 01 is worth 15 points; its test cells' metadata gives 14",
        ),
        ("Exercise 1.3 (3 points)", "says Exercise 1.3 is worth 3 points; its test cells' metadata gives 4"),
        (
            "The first assignment is worth 14 points.",
            "'The first assignment is worth 14 points.' states points",
        ),
    ]:
        page.write_text(f"# Intro\n\n{text}\n")
        with pytest.raises(SystemExit):
            nbtools.cmd_points(types.SimpleNamespace())
        assert message in capsys.readouterr().err, text
