"""The course's nbgrader preprocessors, on small notebooks built here (no kernel, no nbgrader run)."""

import nbformat
from nbgrader.utils import determine_grade

from grading.preprocessors import WarningsDoNotFail


def _cell(grade_id: str, *, solution: bool, outputs: list) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("pass")
    meta = {"grade": not solution, "solution": solution, "grade_id": grade_id, "locked": not solution}
    if not solution:
        meta["points"] = 2
    cell.metadata["nbgrader"] = {**meta, "schema_version": 3}
    cell.outputs = outputs
    return cell


def test_a_warning_on_stderr_no_longer_fails_a_test_cell_but_an_error_still_does():
    text = "/tmp/ipykernel_7/1.py:3: UserWarning: the mesh has one device\n  warnings.warn(msg)\n"
    warning = nbformat.v4.new_output("stream", name="stderr", text=text)
    error = nbformat.v4.new_output("error", ename="CheckFailed", evalue="expected 3, got 4", traceback=[])
    warned = _cell("test_warned", solution=False, outputs=[warning])
    failed = _cell("test_failed", solution=False, outputs=[warning.copy(), error])
    answer = _cell("answer", solution=True, outputs=[warning.copy()])
    assert determine_grade(warned)[0] == 0  # what nbgrader alone does with a warning
    nb = nbformat.v4.new_notebook(cells=[answer, warned, failed])
    nb, _ = WarningsDoNotFail().preprocess(nb, {})
    assert determine_grade(nb.cells[1]) == (2, 2)
    assert "UserWarning: the mesh has one device" in nb.cells[1].outputs[0]["text"]  # still in the feedback
    assert determine_grade(nb.cells[2])[0] == 0
    assert nb.cells[0].outputs[0]["name"] == "stderr"  # answer cells are left as they are
