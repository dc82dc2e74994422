"""grading.repair: every way a submission gets mangled maps back onto the released notebook."""

import copy
import json
import warnings

import nbformat
import pytest

from grading.assignment import grade_id, is_answer, metadata
from grading.repair import repair
from tests.notebooks import ASSIGNMENTS, ROOT
from tools import handed_in

RELEASE = nbformat.read(ROOT / "exercises" / "01_meshes" / "01_meshes.ipynb", as_version=4)
ANSWERS = [grade_id(c) for c in RELEASE.cells if is_answer(c)]


def learner_copy():
    nb = copy.deepcopy(RELEASE)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in ANSWERS:
            cell.source = cell.source.replace("raise NotImplementedError", f"return 'answer of {gid}'  #")
    return nb


def structure(nb):
    return [(c.cell_type, grade_id(c)) for c in nb.cells]


def answer_source(nb, gid):
    return next(c.source for c in nb.cells if grade_id(c) == gid)


def test_untouched_submission_needs_no_repair():
    result = repair(learner_copy(), RELEASE)
    assert result.repairs == []
    assert structure(result.notebook) == structure(RELEASE)


def test_stripped_metadata_is_found_by_the_def_line():
    nb = learner_copy()
    for cell in nb.cells:
        cell.metadata = {}
    result = repair(nb, RELEASE)
    assert structure(result.notebook) == structure(RELEASE)
    for gid in ANSWERS:
        assert f"answer of {gid}" in answer_source(result.notebook, gid)
    assert result.repairs == []  # a notebook with no metadata at all is how Colab saves it: nothing to say


@pytest.mark.parametrize("later_runs_last", [True, False])
def test_duplicate_answer_keeps_the_one_run_last(later_runs_last):
    nb = learner_copy()
    i = next(k for k, c in enumerate(nb.cells) if grade_id(c) == "shard_sums")
    twin = copy.deepcopy(nb.cells[i])
    twin.source = twin.source.replace("answer of shard_sums", "second try")
    nb.cells[i].execution_count, twin.execution_count = (3, 9) if later_runs_last else (9, 3)
    nb.cells.insert(i + 1, twin)
    result = repair(nb, RELEASE)
    assert structure(result.notebook) == structure(RELEASE)
    kept = answer_source(result.notebook, "shard_sums")
    assert ("second try" in kept) is later_runs_last


def test_markdown_answer_becomes_code_again():
    nb = learner_copy()
    i = next(k for k, c in enumerate(nb.cells) if grade_id(c) == "devices_holding")
    nb.cells[i] = nbformat.v4.new_markdown_cell(nb.cells[i].source)
    result = repair(nb, RELEASE)
    assert structure(result.notebook) == structure(RELEASE)
    assert "answer of devices_holding" in answer_source(result.notebook, "devices_holding")


def test_edited_and_deleted_tests_come_back_from_the_release():
    nb = learner_copy()
    i = next(k for k, c in enumerate(nb.cells) if grade_id(c) == "test_shard_sums_visible")
    nb.cells[i].source = "pass"
    nb.cells = [c for c in nb.cells if grade_id(c) != "test_per_device_shape_hidden"]
    result = repair(nb, RELEASE)
    assert structure(result.notebook) == structure(RELEASE)
    assert answer_source(result.notebook, "test_shard_sums_visible") == answer_source(
        RELEASE, "test_shard_sums_visible"
    )


def test_extra_cells_stay_in_place_without_grading_metadata():
    nb = learner_copy()
    i = next(k for k, c in enumerate(nb.cells) if grade_id(c) == "per_device_shape")
    helper = nbformat.v4.new_code_cell("def helper():\n    return 1")
    helper.metadata["nbgrader"] = {"grade": True, "grade_id": "sneaky", "points": 100, "solution": False}
    nb.cells.insert(i, helper)
    result = repair(nb, RELEASE)
    cells = result.notebook.cells
    j = next(k for k, c in enumerate(cells) if c.source.startswith("def helper"))
    assert grade_id(cells[j + 1]) == "per_device_shape"  # still right before it
    assert not metadata(cells[j])
    assert structure(result.notebook) == [*structure(RELEASE)[:j], ("code", None), *structure(RELEASE)[j:]]


def test_missing_answer_becomes_the_stub_and_is_reported():
    nb = learner_copy()
    nb.cells = [c for c in nb.cells if grade_id(c) != "sharding_for_layout"]
    result = repair(nb, RELEASE)
    assert "NotImplementedError" in answer_source(result.notebook, "sharding_for_layout")
    assert any("no answer cell for sharding_for_layout" in r for r in result.repairs)


# --- Colab downloads: every assignment's solution, with learners' helper cells --------------------


def colab_read(nb, tmp_path, name="download.ipynb"):
    """``nb`` saved as Colab saves it, then read back as grade.py reads a submission."""
    path = handed_in.write_colab_download(nb, tmp_path / name)
    raw = json.loads(path.read_text())
    assert raw["nbformat_minor"] == 0 and "colab" in raw["metadata"]
    assert not any(metadata(c) for c in raw["cells"])
    assert all(c.get("outputs") for c in raw["cells"] if c["cell_type"] == "code")
    return nbformat.read(path, as_version=4)


def release_of(assignment):
    return nbformat.read(next((ROOT / "exercises" / assignment).glob("*.ipynb")), as_version=4)


def expected_cells(learner_nb):
    """What grading must run: the learner's cells in their order, released text for released cells."""
    return [(c.cell_type, c.source.strip()) for c in learner_nb.cells if c.source.strip()]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_colab_download_of_the_solution_needs_no_note(assignment, tmp_path):
    solved = handed_in.solved_notebook(assignment)
    result = repair(colab_read(solved, tmp_path), release_of(assignment))
    assert result.repairs == []
    assert structure(result.notebook) == structure(release_of(assignment))
    assert expected_cells(result.notebook) == expected_cells(solved)


@pytest.mark.parametrize("placement", handed_in.PLACEMENTS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_colab_download_keeps_every_helper_cell_where_it_was(assignment, placement, tmp_path):
    # The bug this catches: a released cell recognised by its text got the role "release:i,m,p,o,r,t,s",
    # so an extra cell after it was dropped (a NameError in grading) while the notes said it was kept.
    solved = handed_in.add_helper_cells(handed_in.solved_notebook(assignment), placement)
    release = release_of(assignment)
    with warnings.catch_warnings(record=True) as caught:  # the learner's cells have no ids: no
        warnings.simplefilter("always")  # MissingIDFieldWarning on the instructor's terminal
        result = repair(colab_read(solved, tmp_path), release)
    assert not caught, [f"{type(w.message).__name__}: {w.message}" for w in caught]
    helpers = len(handed_in.answer_names(solved))
    assert result.repairs == [
        f"{helpers} extra code cell(s) were kept where they were; they run but are not graded."
    ]
    assert expected_cells(result.notebook) == expected_cells(solved)  # same cells, same order
    released = [(t, g) for t, g in structure(result.notebook) if g is not None]
    assert released == structure(release)
    for name in handed_in.answer_names(solved):
        cells = result.notebook.cells
        defined = next(k for k, c in enumerate(cells) if c.source.startswith(f"def _helper_for_{name}("))
        tests = [k for k, c in enumerate(cells) if (grade_id(c) or "").startswith(f"test_{name}")]
        assert tests and defined < min(tests), (name, placement)
        assert not metadata(cells[defined])


def _test_cells_of(name):
    return {f"test_{name}_visible", f"test_{name}_hidden"}


def test_notes_name_only_what_happened():
    # Metadata lost by the answer cells only (not a whole Colab download): one note per answer.
    nb = learner_copy()
    for cell in nb.cells:
        if is_answer(cell):
            cell.metadata = {}
    assert sorted(repair(nb, RELEASE).repairs) == sorted(
        f"the answer cell of {gid} had lost its grading metadata; it was found by `def {gid}(`."
        for gid in ANSWERS
    )
    # A deleted test is named (an edited one that kept its metadata is simply replaced, as nbgrader
    # does); empty cells are dropped without a note.
    nb = learner_copy()
    nb.cells = [c for c in nb.cells if grade_id(c) != "test_per_device_shape_hidden"]
    edited = next(c for c in nb.cells if grade_id(c) == "test_shard_sums_visible")
    edited.source = "pass"
    nb.cells.append(nbformat.v4.new_code_cell("   \n"))
    assert repair(nb, RELEASE).repairs == [
        "test cell(s) test_per_device_shape_hidden had been deleted or edited beyond recognition; "
        "the released ones ran."
    ]


def test_split_answer_cell_keeps_its_first_half():
    # Splitting a cell in Jupyter copies its metadata: both halves claim to be the answer. The half
    # without `def f(` is the learner's helper, not a second answer.
    nb = learner_copy()
    i = next(k for k, c in enumerate(nb.cells) if grade_id(c) == "shard_sums")
    half = copy.deepcopy(nb.cells[i])
    half.source = "def helper_of_shard_sums():\n    return 1"
    nb.cells.insert(i, half)
    result = repair(nb, RELEASE)
    assert result.repairs == ["1 extra code cell(s) were kept where they were; they run but are not graded."]
    sources = [c.source for c in result.notebook.cells]
    assert sources.index(half.source) + 1 == sources.index(answer_source(result.notebook, "shard_sums"))


def test_a_released_markdown_cell_that_quotes_a_def_line_is_not_an_answer(tmp_path):
    # Assignment 3 explains with a markdown cell that starts a line `def ...(`; in a download without
    # metadata it must still be recognised as the released cell.
    solved = handed_in.solved_notebook("03_explicit_sharding")
    result = repair(colab_read(solved, tmp_path), release_of("03_explicit_sharding"))
    assert not any("cells define" in r for r in result.repairs)
