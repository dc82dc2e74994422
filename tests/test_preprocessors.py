"""The course's nbgrader preprocessors, on small notebooks built here (no kernel, no nbgrader run)."""

import html as htmllib
import json
import random

import nbformat
from nbgrader.utils import determine_grade

from grading import preprocessors, protocol
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


def _stream(name: str, text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_carriage_returns_are_applied_as_nbclient_does_in_linear_time():
    # nbclient's regex is the oracle; ours must agree on every string, including \r at a line's end,
    # \r\r, \r\n and a last line with no newline.
    from nbclient.client import _RGX_CARRIAGERETURN

    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice("ab\r\n\b") for _ in range(rng.randrange(0, 14)))
        assert preprocessors._carriage_returns(text) == _RGX_CARRIAGERETURN.sub("", text), repr(text)


def test_streams_are_merged_per_name_with_stdout_before_a_following_stderr():
    image = nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"})
    outputs = [
        _stream("stderr", "warn 1\n"),
        _stream("stdout", "10%\r50%\r100%\n"),
        image,
        _stream("stderr", "warn 2\n"),
        _stream("stdout", "done\n"),
    ]
    merged = preprocessors.coalesce_streams(outputs)
    assert [(o["output_type"], o.get("name")) for o in merged] == [
        ("stream", "stdout"),
        ("stream", "stderr"),
        ("display_data", None),
    ]
    assert merged[0]["text"] == "100%\ndone\n"
    assert merged[1]["text"] == "warn 1\nwarn 2\n"


def _message(kind: str, **content) -> dict:
    return {"msg_type": kind, "content": content}


def test_output_budget_keeps_what_fits_and_counts_every_character_it_cuts():
    budget = preprocessors.OutputBudget()
    lines = "".join(f"line {i}\n" for i in range(preprocessors.MAX_TEXT_LINES + 500))
    first = _message("stream", name="stdout", text=lines)
    budget.capture(first)
    assert first["content"]["text"].count("\n") == preprocessors.MAX_TEXT_LINES
    assert first["content"]["text"].endswith(f"line {preprocessors.MAX_TEXT_LINES - 1}\n")
    later = _message("stream", name="stdout", text="x" * 10 + "\n")
    budget.capture(later)
    assert later["content"]["text"] == ""
    assert budget.cut_chars == len(lines) - len(first["content"]["text"]) + 11
    assert budget.cut_lines == 500 + 1
    assert f"{budget.cut_chars:,} characters of printed output in 501 lines" in (budget.note() or "")

    budget = preprocessors.OutputBudget()
    long_line = _message("stream", name="stdout", text="y" * (preprocessors.MAX_TEXT_CHARS + 7))
    budget.capture(long_line)
    assert long_line["content"]["text"] == "y" * preprocessors.MAX_TEXT_CHARS
    assert budget.cut_chars == 7 and budget.cut_lines == 0


def test_output_budget_replaces_a_displayed_result_past_the_limit_and_shortens_a_huge_error():
    budget = preprocessors.OutputBudget()
    small = _message("display_data", data={"image/png": "i" * 1000}, metadata={"width": 3})
    huge = _message("execute_result", data={"text/plain": "z" * preprocessors.MAX_RICH_CHARS}, metadata={})
    for message in (small, huge):
        budget.capture(message)
    assert small["content"]["data"] == {"image/png": "i" * 1000}
    assert list(huge["content"]["data"]) == ["text/plain"]
    assert huge["content"]["data"]["text/plain"].startswith(preprocessors.CUT_PREFIX)
    assert "1 displayed result past 2 MiB" in (budget.note() or "")
    error = _message("error", ename="ValueError", evalue="v" * 10**6, traceback=["t" * 10**6, "short"])
    budget.capture(error)
    assert len(error["content"]["evalue"]) == preprocessors.MAX_ERROR_CHARS
    assert [len(line) for line in error["content"]["traceback"]] == [preprocessors.MAX_ERROR_CHARS, 5]


def test_clear_output_gives_the_budget_back_but_keeps_the_count_of_what_was_cut():
    budget = preprocessors.OutputBudget()
    budget.capture(_message("stream", name="stdout", text="p" * (preprocessors.MAX_TEXT_CHARS + 1)))
    budget.capture(_message("clear_output", wait=False))
    after = _message("stream", name="stdout", text="100%\n")
    budget.capture(after)
    assert after["content"]["text"] == "100%\n"
    assert budget.cut_chars == 1
    assert preprocessors.OutputBudget().note() is None  # nothing cut, nothing said


# ------------------------------------------------------------------------------------------------
# Proof that a test cell ran, and hidden-test lines kept off the feedback page


def _test_cell(grade_id: str, source: str, outputs: list | None = None) -> nbformat.NotebookNode:
    cell = _cell(grade_id, solution=False, outputs=outputs or [])
    cell.source = source
    return cell


HIDDEN_SOURCE = (
    "expect_equal(per_device_shape((8, 4), mesh), (2, 4))\n"
    "### BEGIN HIDDEN TESTS\n"
    "from grading.graders import a01_meshes as graders\n"
    "graders.check_per_device_shape(per_device_shape)\n"
    ")\n"
    "### END HIDDEN TESTS\n"
)


def _proof_tokens(nb) -> list[str]:
    return [m[1] for c in nb.cells for m in [preprocessors.PROOF_CALL.search(c.source)] if m]


def test_every_test_cell_ends_with_a_token_of_its_own_and_a_skipped_cell_gets_none():
    # Property: the token is chosen per cell and per run (a hook cannot reuse one it saw), the epilogue
    # comes after the instructor's last line, and a cell replaced by SkipCells is left alone.
    def hardened():
        cells = [_test_cell("t1", "print('a')"), _test_cell("t2", "print('b')\n")]
        cells.append(_test_cell("t3", preprocessors.SKIPPED_ENDLESS_SOURCE))
        nb, _ = preprocessors.HardenTests().preprocess(nbformat.v4.new_notebook(cells=cells), {})
        return nb

    first, second = hardened(), hardened()
    tokens = _proof_tokens(first)
    assert len(tokens) == 2 and len(set(tokens + _proof_tokens(second))) == 4
    for cell, own in zip(first.cells[:2], ["print('a')", "print('b')\n"], strict=True):
        epilogue = preprocessors.EPILOGUE_BLOCK.search(cell.source)
        assert epilogue and epilogue.end() == len(cell.source)  # the cell's last lines
        assert preprocessors.PROLOGUE_BLOCK.sub("", preprocessors.EPILOGUE_BLOCK.sub("", cell.source)) == own
    assert first.cells[2].source == preprocessors.SKIPPED_ENDLESS_SOURCE


def _proof(token: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("display_data", data={preprocessors.PROOF_MIME: token})


def test_a_test_cell_without_its_token_scores_0_and_the_proof_never_stays_in_the_output():
    token = "ab12"
    ran = _test_cell("ran", "", [_stream("stdout", "Self-check passed.\n"), _proof(token)])
    preprocessors.settle_proof(ran, token)
    assert determine_grade(ran) == (2, 2) and [o["output_type"] for o in ran.outputs] == ["stream"]
    for outputs in ([], [_stream("stdout", "Self-check passed.\n")], [_proof("forged")]):
        silent = _test_cell("silent", "", outputs)  # no output at all, or the wrong token
        preprocessors.settle_proof(silent, token)
        assert determine_grade(silent)[0] == 0
        assert silent.outputs[-1]["ename"] == preprocessors.NO_PROOF_ENAME
        assert not [o for o in silent.outputs if preprocessors.PROOF_MIME in o.get("data", {})]
    error = nbformat.v4.new_output("error", ename="CheckFailed", evalue="expected 3, got 4", traceback=[])
    failed = _test_cell("failed", "", [error])
    preprocessors.settle_proof(failed, token)  # it failed on its own: one error, its own
    assert [o["ename"] for o in failed.outputs] == ["CheckFailed"]
    learners = _cell("answer", solution=True, outputs=[_proof(token)])
    preprocessors.settle_proof(learners, None)  # a proof printed by a learner's cell is dropped too
    assert learners.outputs == [] and determine_grade(_test_cell("t", "", []))[0] == 2


def test_a_test_cell_whose_error_was_hidden_scores_0_with_its_token_shown():
    # Property: the kernel's reply says the cell raised; no error output came (code the test called set
    # a handler that shows nothing) and the token did (read from the cell's text): 0, and it says why.
    token = "ab12"
    hidden = _test_cell("hidden", "", [_stream("stdout", "Self-check passed.\n"), _proof(token)])
    preprocessors.settle_proof(hidden, token, raised=True)
    assert determine_grade(hidden)[0] == 0
    assert hidden.outputs[-1]["ename"] == preprocessors.NO_PROOF_ENAME
    assert hidden.outputs[-1]["evalue"] == protocol.HIDDEN_ERROR_MESSAGE
    error = nbformat.v4.new_output("error", ename="CheckFailed", evalue="expected 3, got 4", traceback=[])
    shown = _test_cell("shown", "", [error])
    preprocessors.settle_proof(shown, token, raised=True)  # the error showed: it is the cell's only one
    assert [o["ename"] for o in shown.outputs] == ["CheckFailed"]


def test_the_proof_is_never_cut_by_the_output_budget():
    budget = preprocessors.OutputBudget()
    budget.capture(_message("display_data", data={"text/plain": "z" * preprocessors.MAX_RICH_CHARS}))
    proof = _message("display_data", data={preprocessors.PROOF_MIME: "ab12"}, metadata={})
    budget.capture(proof)
    assert proof["content"]["data"] == {preprocessors.PROOF_MIME: "ab12"}


def test_skip_cells_replaces_cells_that_never_stopped_with_their_own_explanation():
    cells = [nbformat.v4.new_code_cell("while True: pass"), nbformat.v4.new_code_cell("import os")]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb, _ = preprocessors.SkipCells(skip=[1], endless=[0]).preprocess(nb, {})
    assert nb.cells[0].source == preprocessors.SKIPPED_ENDLESS_SOURCE
    assert nb.cells[1].source == preprocessors.SKIPPED_CELL_SOURCE
    message = " ".join(nb.cells[0].source.replace('"\n    "', "").split())
    assert "never stopped, even when interrupted" in message


def test_feedback_removes_every_hidden_test_line_an_output_reproduces():
    # Property: whatever a learner's code printed, displayed or raised, in any cell, no hidden-test line
    # of the notebook reaches the page, as printed, escaped for HTML, inside a repr or in a traceback
    # with colours; short lines and lines the learner sees anyway are left alone.
    test = _test_cell("test_x", HIDDEN_SOURCE)
    nb = nbformat.v4.new_notebook(cells=[test])
    nb, _ = preprocessors.HardenTests().preprocess(nb, {})
    line = "graders.check_per_device_shape(per_device_shape)"
    imports = "from grading.graders import a01_meshes as graders"
    shown = nbformat.v4.new_code_cell("print(In[-2])")
    shown.outputs = [
        _stream("stdout", f"{HIDDEN_SOURCE}\nexpect_equal(per_device_shape((8, 4), mesh), (2, 4))\n)\n"),
        nbformat.v4.new_output("display_data", data={"text/html": f"<pre>{htmllib.escape(imports)}</pre>"}),
        nbformat.v4.new_output("execute_result", data={"text/plain": repr(HIDDEN_SOURCE)}),
        nbformat.v4.new_output("display_data", data={"application/json": {"code": [imports]}}),
        nbformat.v4.new_output(
            "error",
            ename="ValueError",
            evalue=line,
            traceback=[f"\x1b[0;32m----> 1\x1b[0m {line[:9]}\x1b[0m{line[9:]}"],
        ),
    ]
    nb.cells.append(shown)
    test.outputs = [_stream("stdout", f"called from {line}\n")]
    nb, _ = preprocessors.HideHiddenTests().preprocess(nb, {})
    page = json.dumps(nb)
    for hidden in (line, imports, imports.replace('"', "&quot;")):
        assert hidden not in page and htmllib.escape(hidden) not in page
    assert preprocessors.REDACTED in nb.cells[0].outputs[0]["text"]
    text = nb.cells[1].outputs[0]["text"]
    assert "expect_equal(per_device_shape((8, 4), mesh), (2, 4))" in text  # visible to the learner
    assert "\n)\n" in text  # too short to say anything
    assert preprocessors.EPILOGUE_BEGIN not in nb.cells[0].source
    assert preprocessors.PROLOGUE_BEGIN not in nb.cells[0].source
    assert nb.cells[0].source.startswith("expect_equal(") and nb.cells[0].source.endswith("\n")
