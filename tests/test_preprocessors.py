"""The course's nbgrader preprocessors, on small notebooks built here (no kernel, no nbgrader run)."""

import random

import nbformat
from nbgrader.utils import determine_grade

from grading import preprocessors
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
