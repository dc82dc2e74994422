"""grading.repair: every way a submission gets mangled maps back onto the released notebook."""

import copy

import nbformat
import pytest

from grading.repair import repair
from tests.notebooks import ROOT, nbgrader_meta

RELEASE = nbformat.read(ROOT / "exercises" / "01_meshes" / "01_meshes.ipynb", as_version=4)
ANSWERS = [nbgrader_meta(c)["grade_id"] for c in RELEASE.cells if nbgrader_meta(c).get("solution")]


def learner_copy():
    nb = copy.deepcopy(RELEASE)
    for cell in nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid in ANSWERS:
            cell.source = cell.source.replace("raise NotImplementedError", f"return 'answer of {gid}'  #")
    return nb


def structure(nb):
    return [(c.cell_type, nbgrader_meta(c).get("grade_id")) for c in nb.cells]


def answer_source(nb, gid):
    return next(c.source for c in nb.cells if nbgrader_meta(c).get("grade_id") == gid)


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
        assert any(f"found by `def {gid}(`" in r for r in result.repairs)


@pytest.mark.parametrize("later_runs_last", [True, False])
def test_duplicate_answer_keeps_the_one_run_last(later_runs_last):
    nb = learner_copy()
    i = next(k for k, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "shard_sums")
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
    i = next(k for k, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "devices_holding")
    nb.cells[i] = nbformat.v4.new_markdown_cell(nb.cells[i].source)
    result = repair(nb, RELEASE)
    assert structure(result.notebook) == structure(RELEASE)
    assert "answer of devices_holding" in answer_source(result.notebook, "devices_holding")


def test_edited_and_deleted_tests_come_back_from_the_release():
    nb = learner_copy()
    i = next(
        k for k, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "test_shard_sums_visible"
    )
    nb.cells[i].source = "pass"
    nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") != "test_per_device_shape_hidden"]
    result = repair(nb, RELEASE)
    assert structure(result.notebook) == structure(RELEASE)
    assert answer_source(result.notebook, "test_shard_sums_visible") == answer_source(
        RELEASE, "test_shard_sums_visible"
    )


def test_extra_cells_stay_in_place_without_grading_metadata():
    nb = learner_copy()
    i = next(k for k, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "per_device_shape")
    helper = nbformat.v4.new_code_cell("def helper():\n    return 1")
    helper.metadata["nbgrader"] = {"grade": True, "grade_id": "sneaky", "points": 100, "solution": False}
    nb.cells.insert(i, helper)
    result = repair(nb, RELEASE)
    cells = result.notebook.cells
    j = next(k for k, c in enumerate(cells) if c.source.startswith("def helper"))
    assert nbgrader_meta(cells[j + 1]).get("grade_id") == "per_device_shape"  # still right before it
    assert "nbgrader" not in cells[j].metadata
    assert structure(result.notebook) == [*structure(RELEASE)[:j], ("code", None), *structure(RELEASE)[j:]]


def test_missing_answer_becomes_the_stub_and_is_reported():
    nb = learner_copy()
    nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") != "sharding_for_layout"]
    result = repair(nb, RELEASE)
    assert "NotImplementedError" in answer_source(result.notebook, "sharding_for_layout")
    assert any("no answer cell for sharding_for_layout" in r for r in result.repairs)
