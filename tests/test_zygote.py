"""tests/zygote.py: the in-process gradings forked from one Python that imported what they import."""

import os

import nbformat


def test_a_forked_grading_runs_the_command_with_its_own_output_and_exit_code(grading_zygote, tmp_path):
    # Property: a request runs `python -m tests.submissions` with its arguments in a child of the
    # zygote: its result where asked, its output in its files, its exit code reported (a failure too,
    # with the message in its stderr file), and no grading left behind.
    zygote = grading_zygote()
    out = tmp_path / "reference.ipynb"
    build = ["build", "01_meshes", "reference_solution", str(out)]
    pid = zygote.start(build, tmp_path / "o1", tmp_path / "e1")
    assert pid != zygote.proc.pid and zygote.wait(pid, timeout=120) == 0
    assert nbformat.read(out, as_version=4).cells
    pid = zygote.start(["grade", "99_no_such_assignment"], tmp_path / "o2", tmp_path / "e2")
    assert zygote.wait(pid, timeout=120) != 0
    assert "99_no_such_assignment" in (tmp_path / "e2").read_text()
    assert not zygote.ended
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        pass  # reaped by the zygote
    else:
        raise AssertionError(f"grading {pid} still exists after it ended")
