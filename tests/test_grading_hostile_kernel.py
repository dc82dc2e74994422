"""End to end: notebooks that attack how their cells run, graded by `make grade` in one batch beside the
reference solution and a wrong answer (grading/README.md, *What grading defends against*): the
session's hostile batch (tests/conftest.py: hostile_batch), which tests/test_grading_hostile.py and
tests/test_feedback.py hand their hostile notebooks into as well.

* Blank notebooks that make every test cell pass without running it: one with an IPython input
  transformer, an AST transformer and event callbacks (undone before each test: grading.tamper
  .reset_ipython), one that patches IPython's class so no test runs at all (no test cell displays its
  token: grading.preprocessors.settle_proof), and one that defines ``__import__`` to answer for the
  kernel's reset while its transformer runs only what grading adds (so each test would display its token
  unchecked), and one that hands the hidden tests fake graders through ``builtins.__import__``
  (grading.tamper: tampering). All score what their answers earn: 0.
* A notebook that prints the hidden tests into its own outputs (the input history, linecache, cell
  events, and from inside its answer the kernel's request and the caller's lines): full marks, and
  no hidden-test line on its feedback page.
* A notebook whose answer cell never stops, even when interrupted (a bare ``except:`` in a loop): that
  cell is skipped, the rest graded, with a note and a feedback page.

The neighbours' scores are exactly what they are alone. Unit tests of each piece are in
tests/test_preprocessors.py and tests/test_protocol.py.
"""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import nbformat
import pytest

from grading import protocol, worker
from grading.assignment import grade_id, is_answer, is_test
from tests import submissions
from tests.conftest import GRADED_ASSIGNMENT, HOSTILE_WRONG
from tests.notebooks import ROOT

# Runs `make grade`: never at the same time as another module that does (see CONTRIBUTING.md).
pytestmark = pytest.mark.xdist_group("grading")

ASSIGNMENT = GRADED_ASSIGNMENT

HOOKS = """\
import ast
ip = get_ipython()
ip.input_transformers_cleanup.append(lambda lines: ["pass\\n"])
class Nothing(ast.NodeTransformer):
    def visit_Module(self, node):
        return ast.Module(body=[], type_ignores=[])
ip.ast_transformers.append(Nothing())
ip.events.register("pre_run_cell", lambda info: print("RAN", info.raw_cell))
"""
#: Not undone (a method of IPython's class): no test cell runs, so none displays its token.
CLASS_PATCH = """\
from IPython.core.inputtransformer2 import TransformerManager
TransformerManager.transform_cell = lambda self, cell: "pass\\n"
"""
#: Written against the protocol: a global ``__import__`` would answer for the kernel's reset (if it looked
#: names up in the learner's namespace), and the transformer runs only what grading adds to a test cell,
#: so each would display its token without checking anything (14/14 before the fix). Its name holds
#: terminal escapes (erase the line above), which no report may carry as they are.
SHADOW_IMPORT = """\
import builtins
_real_import = builtins.__import__
class _Fake:
    def reset_ipython(self): return ""
    def forget_tests(self): return ""
def __import__(name, *args, **kwargs):
    return _Fake() if name == "grading.tamper" else _real_import(name, *args, **kwargs)
def _keep_grading(lines):
    out, keep = [], False
    for line in lines:
        keep = keep or line.startswith("# >>> added when graded")
        if keep:
            out.append(line)
        if line.startswith("# <<< end of what grading added"):
            keep = False
    return out or lines
_keep_grading.__name__ = "keep\\x1b[1A\\x1b[2K"
get_ipython().input_transformers_cleanup.append(_keep_grading)
"""
#: Hands the hidden tests fake graders through the import function (10/14 for a blank notebook before
#: grading.tamper checked ``__import__``): caught as tampering.
IMPORT_HIJACK = """\
import builtins, types
_real_import = builtins.__import__
_checks = ("check_per_device_shape", "check_devices_holding", "check_sharding_for_layout", "check_shard_sums")
_fake = types.SimpleNamespace(a01_meshes=types.SimpleNamespace(**{n: lambda *a, **k: None for n in _checks}))
def _hijack(name, *args, **kwargs):
    return _fake if name == "grading.graders" else _real_import(name, *args, **kwargs)
builtins.__import__ = _hijack
"""
#: Printed in the cells below: what a later cell can find of a test cell in the kernel.
READS_HISTORY = """\
import linecache
ip = get_ipython()
print("IN:", In[-3:], _ih[-3:], _i, _ii, _iii)
print("LAST:", ip.last_execution_result.info.raw_cell if ip.last_execution_result else None)
print("LINECACHE:", [e[2] for e in list(linecache.cache.values()) if "graders" in "".join(e[2])])
print("HISTORY:", list(ip.history_manager.get_range(raw=True)))
print("STOLEN:", "\\n".join(STOLEN))
"""
#: Appended to the per_device_shape answer: while a test calls it, it reads the test's source.
READS_CALLER = """\
import inspect as _inspect
STOLEN = []
_per_device_shape = per_device_shape
def per_device_shape(*args, **kwargs):
    try:
        STOLEN.append(get_ipython().kernel.get_parent()["content"]["code"])
    except Exception as e:
        STOLEN.append(repr(e))
    for frame in _inspect.stack()[1:3]:
        print("CALLER:", "".join(frame.code_context or []))
    return _per_device_shape(*args, **kwargs)
"""
ENDLESS = """\
import time
while True:
    try:
        time.sleep(0.05)
    except:  # also catches the interrupt at the cell limit
        pass
"""


def _solution() -> nbformat.NotebookNode:
    return nbformat.read(next((ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")), as_version=4)


def _blank(hook: str) -> nbformat.NotebookNode:
    """The released exercise, unanswered, with ``hook`` in a cell before the first answer."""
    nb = nbformat.read(next((ROOT / "exercises" / ASSIGNMENT).glob("*.ipynb")), as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if is_answer(c))
    nb.cells.insert(first, nbformat.v4.new_code_cell(hook))
    return nb


def _reads_tests() -> nbformat.NotebookNode:
    nb = _solution()
    first = next(i for i, c in enumerate(nb.cells) if is_answer(c))
    events = "get_ipython().events.register('post_run_cell', lambda r: print('AFTER', r.info.raw_cell))\n"
    nb.cells.insert(first, nbformat.v4.new_code_cell(events))
    answer = next(c for c in nb.cells if grade_id(c) == "per_device_shape")
    answer.source += "\n\n" + READS_CALLER
    for index in reversed([i for i, c in enumerate(nb.cells) if is_test(c)]):
        nb.cells.insert(index + 1, nbformat.v4.new_code_cell(READS_HISTORY))
    return nb


def _endless() -> nbformat.NotebookNode:
    nb = _solution()
    answer = next(c for c in nb.cells if grade_id(c) == "devices_holding")
    answer.source = ENDLESS + answer.source
    return nb


HOSTILE = {
    "hostile_blank_hooks": lambda: _blank(HOOKS),
    "hostile_blank_class_patch": lambda: _blank(CLASS_PATCH),
    "hostile_blank_shadow_import": lambda: _blank(SHADOW_IMPORT),
    "hostile_blank_import_hijack": lambda: _blank(IMPORT_HIJACK),
    "hostile_reads_tests": _reads_tests,
    "hostile_endless": _endless,
}


def _page_text(path) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


def hand_in(folder: Path) -> None:
    """This module's notebooks of the session's hostile batch (tests/conftest.py: hostile_batch), which
    also holds the reference solution and the wrong answer HOSTILE_WRONG."""
    for name, build in HOSTILE.items():
        nbformat.write(build(), folder / f"{name}.ipynb")


@pytest.fixture(scope="module")
def batch(hostile_batch):
    # The reports as the batch left them (tests/test_grading_hostile.py grades more into its course later).
    wrong = submissions.load(ASSIGNMENT)[HOSTILE_WRONG]
    return hostile_batch.course, hostile_batch.first.path, hostile_batch.rows, hostile_batch.kept, wrong


def _notes(learners: dict, learner: str) -> str:
    return "\n".join(learners[learner]["notes"])


def test_neighbours_score_what_they_score_alone(batch):
    course, _, rows, learners, wrong = batch
    cells = dict(worker.graded_cells(ASSIGNMENT, course))
    assert float(rows["reference_solution"]["total"]) == sum(cells.values())
    assert learners["reference_solution"]["notes"] == []
    lost = wrong.lost(list(cells))
    for gid, points in cells.items():
        assert float(rows[HOSTILE_WRONG][gid]) == (0.0 if gid in lost else points), gid


def test_a_blank_notebook_that_hooks_ipython_scores_what_its_answers_earn(batch):
    # The hooks are undone before the first test: the tests run, and find no answers (the hook had
    # turned every later cell, the answers too, into `pass`).
    _, reports, rows, learners, _ = batch
    assert float(rows["hostile_blank_hooks"]["total"]) == 0
    notes = _notes(learners, "hostile_blank_hooks")
    assert "changed how IPython runs cells (an input transformer <lambda>" in notes, notes
    for what in ("an AST transformer Nothing", "a pre_run_cell callback <lambda>"):
        assert what in notes, notes
    page = _page_text(reports / "feedback" / "hostile_blank_hooks.html")
    assert protocol.UNDONE_PREFIX in page and "NameError" in page
    assert "scored 0" in (reports / "class.html").read_text().split("hostile_blank_hooks", 1)[1][:3000]


def test_a_notebook_that_answers_for_the_reset_keeps_no_hook_and_no_escape(batch):
    # The reset looks up no name the notebook defined: its transformer is undone, the tests run and
    # find no answers. The hook's name reaches report.txt and the record with its escapes spelt out.
    _, reports, rows, learners, _ = batch
    assert float(rows["hostile_blank_shadow_import"]["total"]) == 0
    notes = _notes(learners, "hostile_blank_shadow_import")
    assert "changed how IPython runs cells (an input transformer keep\\x1b[1A\\x1b[2K)" in notes, notes
    report = (reports / "report.txt").read_text()
    assert "\x1b" not in notes and "\x1b" not in report and "keep\\x1b[1A" in report


def test_a_blank_notebook_that_fakes_the_graders_through_import_scores_0(batch):
    _, _, rows, learners, _ = batch
    assert float(rows["hostile_blank_import_hijack"]["total"]) == 0
    notes = _notes(learners, "hostile_blank_import_hijack")
    assert "the notebook replaced checking tools (the built-in __import__ (now from " in notes, notes


def test_a_test_cell_that_did_not_run_its_checks_scores_0_and_says_why(batch):
    # The class patch is not undone: no test cell runs, so none displays its token.
    course, reports, rows, learners, _ = batch
    assert float(rows["hostile_blank_class_patch"]["total"]) == 0
    notes = _notes(learners, "hostile_blank_class_patch")
    for gid, _ in worker.graded_cells(ASSIGNMENT, course):
        assert f"{gid} gave no proof that its checks ran" in notes, (gid, notes)
    page = _page_text(reports / "feedback" / "hostile_blank_class_patch.html")
    assert f"{protocol.NO_PROOF_ENAME}: {protocol.NO_PROOF_MESSAGE}" in page
    assert protocol.PROOF_MIME not in page and "_grading_prove" not in page


def test_a_notebook_cannot_print_the_hidden_tests_into_its_feedback(batch):
    course, reports, rows, learners, _ = batch
    hidden = submissions.hidden_test_lines(ASSIGNMENT)
    assert float(rows["hostile_reads_tests"]["total"]) == float(rows["hostile_reads_tests"]["max"]) == 14
    changed = (
        "the notebook changed how IPython runs cells (a post_run_cell callback <lambda>); "
        "undone before each test."
    )
    assert changed in _notes(learners, "hostile_reads_tests").splitlines()
    graded = next((course / "grading" / "autograded" / "hostile_reads_tests" / ASSIGNMENT).glob("*.ipynb"))
    printed = {
        line.split(":", 1)[0]: line
        for cell in nbformat.read(graded, as_version=4).cells
        for output in cell.get("outputs", [])
        for line in output.get("text", "").splitlines()
        if line.split(":", 1)[0] in ("IN", "LAST", "LINECACHE", "HISTORY", "STOLEN", "CALLER")
    }
    assert set(printed) == {"IN", "LAST", "LINECACHE", "HISTORY", "STOLEN", "CALLER"}, printed
    # In the kernel, a later cell finds no test cell in its history, linecache or last result ...
    for kind in ("IN", "LAST", "LINECACHE", "HISTORY"):
        assert not [line for line in hidden if line in printed[kind]], (kind, printed[kind])
    # ... but the answer, called by the test, read it (the attack ran: this test can fail), and what
    # it printed was cut as the notebook was graded ...
    outputs = json.dumps([c.get("outputs", []) for c in nbformat.read(graded, as_version=4).cells])
    assert "[a line of a hidden test: not shown]" in outputs
    assert not [line for line in hidden if json.dumps(line)[1:-1] in outputs]
    # ... and no feedback page of the batch shows a hidden-test line.
    for page in (reports / "feedback").glob("*.html"):
        text = _page_text(page)
        assert not [line for line in hidden if line in text], page.name
    own = _page_text(reports / "feedback" / "hostile_reads_tests.html")
    assert "[a line of a hidden test: not shown]" in own


def test_a_cell_that_never_stops_costs_only_its_own_points(batch):
    course, reports, rows, learners, _ = batch
    cells = dict(worker.graded_cells(ASSIGNMENT, course))
    lost = {"test_devices_holding_visible", "test_devices_holding_hidden"}
    for gid, points in cells.items():
        assert float(rows["hostile_endless"][gid]) == (0.0 if gid in lost else points), gid
    notes = _notes(learners, "hostile_endless")
    assert "(devices_holding) ran past the" in notes and "never stopped, even when interrupted" in notes
    page = (reports / "feedback" / "hostile_endless.html").read_text()
    assert "never stopped, even when" in page
    assert "Timeout waiting for IOPub" not in page + notes
