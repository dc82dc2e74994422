"""nbgrader preprocessors of this course: feedback without hidden tests, and grading that survives
a cell that kills its kernel.

HideHiddenTests (feedback). nbgrader's autograded notebook holds the full source of every test
cell, hidden tests included, and tracebacks that quote it. Before feedback HTML is written, this preprocessor
  * replaces each hidden-test block of a test cell with one comment line, and
  * shortens the error output of every test cell to ``ErrorName: message`` — the message is what our
    checks write for learners (expected, got, hint); the traceback would only show grader code.
"""

from __future__ import annotations

import json
import os
import re

from nbclient.exceptions import DeadKernelError
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import Execute
from traitlets import Bool

from grading.assignment import IMPORTS, grade_id, hide_hidden_tests, is_test

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

PROLOGUE_BEGIN = "# >>> added when graded: fresh checking tools, whatever the notebook redefined"
PROLOGUE_END = "# <<< end of what grading added"
PROLOGUE_BLOCK = re.compile(rf"^{re.escape(PROLOGUE_BEGIN)}\n.*?^{re.escape(PROLOGUE_END)}\n", re.S | re.M)


class HideHiddenTests(Preprocessor):
    """Removes hidden-test source and test-cell tracebacks from a notebook before it becomes feedback."""

    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled; nbgrader registers them as is

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_test(cell):
            cell.source = hide_hidden_tests(PROLOGUE_BLOCK.sub("", cell.source))
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    message = _ANSI.sub("", f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
                    output["traceback"] = [message]
        return cell, resources


#: Environment variables through which grading/grade.py talks to the preprocessors below.
SKIP_CELLS_ENV = "SHARDBOOK_SKIP_CELLS"  # comma-separated cell indices to replace before execution
DEATH_FILE_ENV = "SHARDBOOK_DEATH_FILE"  # where to record the index of a cell whose kernel died

SKIPPED_CELL_SOURCE = (
    "raise RuntimeError(\n"
    '    "When this notebook was graded, this cell stopped the Python kernel (os._exit, a crash or "\n'
    '    "running out of memory), so it was skipped and its points are 0."\n'
    ")\n"
)


class SkipCells(Preprocessor):
    """Replaces the cells listed in $SHARDBOOK_SKIP_CELLS with one that raises a clear error.

    grade.py lists here the cells that killed the kernel in an earlier attempt, so the rest of the
    notebook can still be executed and graded.
    """

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        skip = {int(i) for i in os.environ.get(SKIP_CELLS_ENV, "").split(",") if i.strip()}
        for index in skip:
            if 0 <= index < len(nb.cells) and nb.cells[index].cell_type == "code":
                nb.cells[index].source = SKIPPED_CELL_SOURCE
        return nb, resources


class ExecuteRecordingDeaths(Execute):
    """nbgrader's Execute; also writes the index of a cell whose kernel died to $SHARDBOOK_DEATH_FILE."""

    # One output per stream and cell, however the kernel's writes were split in time, so the same
    # notebook gives the same feedback page on any machine and engine (nbclient's trait is not
    # configurable, hence set here).
    coalesce_streams = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            path = os.environ.get(DEATH_FILE_ENV)
            if path:
                with open(path, "w") as f:
                    json.dump({"index": index, "grade_id": grade_id(cell)}, f)
            raise


class WarningsDoNotFail(Preprocessor):
    """Shows a test cell's stderr output as ordinary output, so that only an error fails the test.

    nbgrader scores a test cell 0 when any of its output went to stderr (``nbgrader.utils.determine_grade``).
    Our tests fail by raising; what reaches stderr is a warning — a Python ``warnings.warn`` in the
    learner's code (``UserWarning: ...``), anything else a library writes there — and the same cell
    passes its self-check on Colab. The text stays in the feedback. (XLA's C++ log, such as "Involuntary
    full rematerialization" while a grader compiles its own program, is silenced at its source: grade.py
    runs kernels with ``TF_CPP_MIN_LOG_LEVEL=2``.)
    """

    enabled = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_test(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and output.get("name") == "stderr":
                    output["name"] = "stdout"
        return cell, resources


class HardenTests(Preprocessor):
    """Before each test cell, re-imports the checking tools fresh and checks nothing was replaced.

    The prologue drops every cached ``grading`` and ``shardbook`` module (so a patched grader or check
    is thrown away), runs :func:`grading.tamper.assert_untampered`, then re-runs the released imports
    cell, so names the learner redefined (``expect_equal``, ``np``, ``P`` …) mean what the test
    expects. Feedback pages do not show the prologue.
    """

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        imports = next((c.source for c in nb.cells if grade_id(c) == IMPORTS), "")
        prologue = "\n".join(
            [
                PROLOGUE_BEGIN,
                "import sys as _grading_sys",
                "for _grading_name in [m for m in list(_grading_sys.modules) if m.split('.')[0] in "
                "('grading', 'shardbook')]:",
                "    del _grading_sys.modules[_grading_name]",
                "from grading.tamper import assert_untampered as _grading_assert_untampered",
                "_grading_assert_untampered()",
                imports,
                PROLOGUE_END,
                "",
            ]
        )
        for cell in nb.cells:
            if cell.cell_type == "code" and is_test(cell) and cell.source != SKIPPED_CELL_SOURCE:
                cell.source = prologue + cell.source
        return nb, resources
