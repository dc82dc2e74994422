"""grading/protocol.py: the one module that names what crosses a process boundary while grading.

That its config options reach the preprocessors in a forked nbgrader child is shown in
tests/test_nbgrader_process.py (it runs nbgrader)."""

import builtins
import linecache
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from grading import protocol, tamper
from shardbook.checks import CheckFailed

ROOT = Path(__file__).resolve().parents[1]


def test_the_death_record_reads_back_what_was_written(tmp_path):
    death = protocol.Death(7, "shape_test")
    death.write(tmp_path / protocol.DEATH_FILE_NAME)
    assert protocol.Death.read(tmp_path / protocol.DEATH_FILE_NAME) == death
    assert protocol.Death.read(tmp_path / "none.json") is None
    assert protocol.Death.from_json(protocol.Death(3).to_json()) == protocol.Death(3, None)
    assert protocol.Death(3).where() == "cell 3"
    assert death.where() == "cell 7 (shape_test)"
    endless = protocol.Death(5, "answer", endless=True)
    assert protocol.Death.from_json(endless.to_json()) == endless and not death.endless


def test_the_tamper_finding_the_kernel_raises_is_the_one_the_worker_reads(monkeypatch):
    monkeypatch.setattr(np, "allclose", lambda *a, **k: True)
    with pytest.raises(CheckFailed) as raised:
        tamper.assert_untampered()
    finding = protocol.Tampering.parse("CheckFailed: " + str(raised.value))  # as an error output shows it
    assert finding is not None and finding.found[0].startswith("numpy.allclose (now from ")
    assert protocol.Tampering.parse(finding.message()) == finding
    assert protocol.Tampering.parse("CheckFailed: expected 2, got 3.") is None


def test_an_import_hijack_is_tampering(monkeypatch, shell):
    # Property: a test cell's imports (its graders, the checks) cannot be answered by notebook code:
    # builtins.__import__ replaced, or the notebook's own __builtins__, fails every test after it (a blank
    # notebook that handed the hidden tests fake graders scored 10/14; found in review of issue 46).
    assert tamper.find_tampering() == []
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda *a, **k: real(*a, **k))
    assert [f for f in tamper.find_tampering() if f.startswith("the built-in __import__ (now from ")]
    monkeypatch.setattr(builtins, "__import__", real)
    shell.user_ns["__builtins__"] = dict(vars(builtins))
    try:
        assert tamper.find_tampering() == ["the notebook's __builtins__ (replaced by a notebook cell)"]
    finally:
        shell.user_ns["__builtins__"] = builtins
    assert tamper.find_tampering() == []


def test_autograde_options_name_the_preprocessors_traits(tmp_path):
    from grading.preprocessors import ExecuteRecordingDeaths, SkipCells

    options = protocol.autograde_options([4, 7], tmp_path / "d.json", 30, [9])
    assert options == [
        f"--ExecuteRecordingDeaths.death_file={tmp_path / 'd.json'}",
        "--Execute.timeout=30",
        "--SkipCells.skip=4",
        "--SkipCells.skip=7",
        "--SkipCells.endless=9",
    ]
    assert SkipCells.class_traits(config=True).keys() >= {"skip", "endless"}
    assert ExecuteRecordingDeaths.class_traits(config=True).keys() >= {"death_file", "timeout"}


def test_no_other_file_spells_a_name_that_crosses_a_process_boundary():
    names = [
        protocol.COURSE_ROOT_ENV,
        protocol.SANDBOX_ENV,
        protocol.UID_ENV,
        protocol.NPROC_ENV,
        protocol.Tampering.PREFIX.strip(": "),
        protocol.PROLOGUE_BEGIN,
        protocol.EPILOGUE_BEGIN,
        protocol.PROOF_MIME,
        protocol.NO_PROOF_ENAME,
        protocol.UNDONE_PREFIX,
        "SHARDBOOK_SKIP_CELLS",  # the variables the protocol replaced
        "SHARDBOOK_DEATH_FILE",
        "SHARDBOOK_CELL_TIMEOUT",
    ]
    spelt = re.compile("|".join(re.escape(f'"{name}') for name in names))
    here = Path(__file__).resolve()
    found = [
        str(path.relative_to(ROOT))
        for folder in ("grading", "shardbook", "tools", "tests", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if path not in (here, ROOT / "grading" / "protocol.py") and spelt.search(path.read_text())
    ]
    assert not found, f"spell these through grading.protocol: {found}"


@pytest.fixture()
def shell(ipython_shell):
    """An IPython shell in this process, with the book's error handler installed as on Colab."""
    from shardbook.errors import explain_common_errors

    explain_common_errors(ipython_shell)
    return ipython_shell


def test_reset_undoes_every_hook_a_cell_registered_and_keeps_ipythons_and_the_books(shell):
    # Property: what notebook code registered to rewrite, watch or swallow a cell is gone after
    # reset_ipython (and named), and the next cell runs as written; IPython's own transformers and the
    # book's error handler stay; with nothing registered, nothing is said.
    assert tamper.reset_ipython() == ""
    genuine = list(shell.input_transformers_cleanup)
    seen: list = []
    hooks = (
        "import ast, sys\n"
        "ip = get_ipython()\n"
        "ip.input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"
        "ip.input_transformers_post.append(lambda lines: lines)\n"
        "class Empty(ast.NodeTransformer):\n"
        "    def visit_Module(self, node):\n"
        "        return ast.Module(body=[], type_ignores=[])\n"
        "ip.ast_transformers.append(Empty())\n"
        "ip.events.register('pre_run_cell', SEEN.append)\n"
        "ip.events.register('post_run_cell', print)\n"
        "ip.showtraceback = lambda *a, **k: None\n"
    )
    shell.user_ns["SEEN"] = seen
    assert shell.run_cell(hooks).success
    assert shell.run_cell("raise ValueError('x')").success  # the hooks hold: nothing runs
    shell.set_custom_exc((AssertionError,), lambda *args, **kwargs: [])
    sys.settrace(lambda *a: None)
    try:
        undone = tamper.reset_ipython()
    finally:
        sys.settrace(None)
    for what in (
        "an input transformer <lambda>",
        "an AST transformer Empty",
        "a pre_run_cell callback",
        "a post_run_cell callback print",
        "the shell's showtraceback",
        "a custom exception handler <lambda>",
        "a trace function <lambda>",
    ):
        assert what in undone, (what, undone)
    assert shell.input_transformers_cleanup == genuine and shell.ast_transformers == []
    assert shell.run_cell("result = 6 * 7").success and shell.user_ns["result"] == 42
    assert not shell.run_cell("raise ValueError('x')").success
    assert shell.custom_exceptions == ()  # the lambda's; the book's own handler is kept:
    from shardbook.errors import explain_common_errors

    explain_common_errors(shell)
    assert tamper.reset_ipython() == "" and shell.custom_exceptions


def test_reset_runs_in_the_kernel_whatever_the_notebook_named(shell):
    # Property: the expressions nbgrader has the kernel evaluate around a test cell (in the learner's
    # namespace) look up no name there, so a notebook that defines __import__ (or list, or sys) to
    # answer for them cannot keep its hooks: a blank notebook did that, kept a transformer that ran
    # only grading's own lines of each test, and scored 14/14 (found in review of issue 46).
    from grading.preprocessors import FORGET_EXPRESSION, RESET_EXPRESSION

    shadow = (
        "class _Fake:\n"
        "    def reset_ipython(self): return ''\n"
        "    def forget_tests(self): return ''\n"
        "def __import__(*args, **kwargs): return _Fake()\n"
        "list = sys = lambda *args: []\n"
        "__builtins__ = {'__import__': __import__, 'list': list}\n"
        "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"
    )
    assert shell.run_cell(shadow).success
    try:
        found = shell.user_expressions({"reset": RESET_EXPRESSION, "forget": FORGET_EXPRESSION})
    finally:
        for name in ("__import__", "list", "sys"):
            shell.user_ns.pop(name, None)
        shell.user_ns["__builtins__"] = builtins
    assert found["reset"]["status"] == "ok", found
    assert "an input transformer <lambda>" in found["reset"]["data"]["text/plain"], found
    assert found["forget"]["status"] == "ok", found
    assert not any(getattr(t, "__name__", "") == "<lambda>" for t in shell.input_transformers_cleanup)


def test_a_test_cells_source_is_forgotten_after_it_ran(shell):
    # Property: after forget_tests, no later cell finds a hardened test cell's source in linecache or
    # the last traceback (the test cells are not in In/_ih: nbgrader runs them with store_history off).
    from grading.preprocessors import PROLOGUE_BEGIN

    secret = "hidden" + "_check_4711"  # spelt apart: this file is in linecache too
    source = f"{PROLOGUE_BEGIN}\n{secret} = 1\nraise ValueError('failed')\n"
    shell.run_cell(source, store_history=False)
    assert any(secret in "".join(e[2]) for e in linecache.cache.values() if len(e) > 2)
    assert shell.run_cell("1", store_history=True).success
    tamper.forget_tests()
    left = {k: e[2][:2] for k, e in linecache.cache.items() if len(e) > 2 and secret in "".join(e[2])}
    assert not left, left
    assert getattr(sys, "last_value", None) is None
    assert not any(secret in line for line in shell.user_ns["In"])


def test_prove_displays_the_token_in_ipython_and_does_nothing_outside(shell, monkeypatch):
    shown = []
    monkeypatch.setattr(shell.display_pub, "publish", lambda data, metadata=None, **kw: shown.append(data))
    tamper.prove("ab12")
    assert shown == [{protocol.PROOF_MIME: "ab12"}]
