"""nbgrader preprocessors of this course: feedback without hidden tests, and grading that survives
a cell that kills its kernel.

HideHiddenTests (feedback). nbgrader's autograded notebook holds the full source of every test
cell, hidden tests included, and tracebacks that quote it. Before feedback HTML is written, this preprocessor
  * replaces each hidden-test block of a test cell with one comment line, and
  * shortens the error output of every test cell to what the learner saw on Colab without its cell
    lines (:func:`feedback_lines`): a check's ``CheckFailed: message`` (expected, got, hint), a known
    mistake's sentence and hint; the traceback would only show grader code.
"""

from __future__ import annotations

import json
import re

import nbformat
from nbclient.exceptions import DeadKernelError
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import Execute
from traitlets import Bool, Int, List, Unicode

from grading.assignment import IMPORTS, grade_id, hide_hidden_tests, is_test
from grading.protocol import Death

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
                    output["traceback"] = feedback_lines(
                        output.get("ename", "Error"), output.get("evalue", "")
                    )
        return cell, resources


def feedback_lines(ename: str, evalue: str) -> list[str]:
    """What a feedback page shows of a test cell's error: the lines the learner saw on Colab (a failed
    check's message; a known mistake's sentence and hint, ``shardbook.errors.error_lines``) without the
    notebook lines, else ``ErrorName: message``."""
    from shardbook.errors import error_lines

    ename, evalue = _ANSI.sub("", str(ename)), _ANSI.sub("", str(evalue))
    return error_lines(ename, evalue) or [f"{ename}: {evalue}"]


SKIPPED_CELL_SOURCE = (
    "raise RuntimeError(\n"
    '    "When this notebook was graded, this cell stopped the Python kernel (os._exit, a crash or "\n'
    '    "running out of memory), so it was skipped and its points are 0."\n'
    ")\n"
)


class CellIndices(List):
    """A list of cell indices as a config option. traitlets gives a command-line list of one item
    (``--SkipCells.skip=4``) to the trait as the string ``"4"``, which ``List(Int())`` refuses; this
    reads it (and ``"[4, 7]"``) as integers. Repeated options (``--SkipCells.skip=4 --SkipCells.skip=7``)
    arrive as a list of strings and are read by List itself."""

    def __init__(self, **kwargs):
        super().__init__(Int(), **kwargs)

    def from_string(self, s: str):
        return [int(x) for x in s.strip("[]").split(",") if x.strip()]


class SkipCells(Preprocessor):
    """Replaces the cells listed in its ``skip`` option with one that raises a clear error.

    The worker (grading/worker.py) lists there the cells that killed the kernel in an earlier attempt,
    so the rest of the notebook can still be executed and graded (grading/protocol.py).
    """

    enabled = Bool(True)
    skip = CellIndices(help="indices of the cells to replace before execution").tag(config=True)

    def preprocess(self, nb, resources):
        for index in set(self.skip):
            if 0 <= index < len(nb.cells) and nb.cells[index].cell_type == "code":
                nb.cells[index].source = SKIPPED_CELL_SOURCE
        return nb, resources


#: What one cell's captured output may hold when graded. Beyond it, output is dropped as it arrives,
#: so a cell that prints megabytes (a large array printed by accident) is graded in about the time it
#: runs, and one line at the end of the cell says what was cut. Colab, too, shows only part of a long
#: output. The feedback page keeps at most this many lines per cell (nbgrader's own LimitOutput did).
MAX_TEXT_LINES = 1000
MAX_TEXT_CHARS = 256 * 1024  # printed text (stdout, stderr) of one cell
MAX_RICH_CHARS = 2 * 2**20  # displayed results (plain text, HTML, images as base64) of one cell
MAX_ERROR_CHARS = 64 * 1024  # an error's message, and each line of its traceback
CUT_PREFIX = "[output cut when graded:"


def _size(count: int, unit: str) -> str:
    return f"{count:,} {unit}{'' if count == 1 else 's'}"


class OutputBudget:
    """What one cell's output may still take, and what was cut from it."""

    def __init__(self) -> None:
        self.chars = self.lines = self.rich = 0
        self.cut_chars = self.cut_lines = self.cut_rich = 0

    def restart(self) -> None:
        """After clear_output: the cell's kept output is gone, so is what it used (not what was cut)."""
        self.chars = self.lines = self.rich = 0

    def text(self, text: str) -> str:
        """The part of ``text`` that fits; counts the rest as cut."""
        kept = text[: max(0, MAX_TEXT_CHARS - self.chars)]
        room = MAX_TEXT_LINES - self.lines
        if kept.count("\n") > room:
            end = -1
            for _ in range(room):
                end = kept.index("\n", end + 1)
            kept = kept[: end + 1]
        if len(kept) < len(text):
            self.cut_chars += len(text) - len(kept)
            self.cut_lines += text.count("\n", len(kept))
        self.chars += len(kept)
        self.lines += kept.count("\n")
        return kept

    def display(self, content: dict) -> None:
        """Replaces a displayed result that does not fit with one line saying so."""
        data = content.get("data") or {}
        size = sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in data.values())
        if self.rich + size <= MAX_RICH_CHARS:
            self.rich += size
            return
        self.cut_rich += 1
        kinds = ", ".join(sorted(data))
        content["data"] = {
            "text/plain": f"{CUT_PREFIX} a displayed result ({kinds}) of {_size(size, 'character')}]"
        }
        content["metadata"] = {}

    def note(self) -> str | None:
        """The line that ends a cell whose output was cut, or None."""
        parts = []
        if self.cut_chars:
            parts.append(
                f"{_size(self.cut_chars, 'character')} of printed output in {_size(self.cut_lines, 'line')} "
                f"after the first {MAX_TEXT_LINES:,} lines or {MAX_TEXT_CHARS // 1024} KiB"
            )
        if self.cut_rich:
            parts.append(f"{_size(self.cut_rich, 'displayed result')} past {MAX_RICH_CHARS // 2**20} MiB")
        return f"{CUT_PREFIX} {'; '.join(parts)}; the cell itself ran to its end.]\n" if parts else None

    def capture(self, msg: dict) -> None:
        """Cuts an output message from the kernel to what fits, before nbclient records it."""
        kind, content = msg.get("msg_type"), msg.get("content") or {}
        if kind == "stream":
            content["text"] = self.text(content.get("text", ""))
        elif kind in ("display_data", "execute_result", "update_display_data"):
            self.display(content)
        elif kind == "error":
            content["evalue"] = str(content.get("evalue", ""))[:MAX_ERROR_CHARS]
            content["traceback"] = [str(line)[:MAX_ERROR_CHARS] for line in content.get("traceback", [])]
        elif kind == "clear_output":
            self.restart()


def _carriage_returns(text: str) -> str:
    """What a terminal shows of each line: the part after its last carriage return that is followed by
    something on the line. nbclient's regex for this takes time quadratic in a line's length."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        cr = line.rfind("\r", 0, len(line) - 1)
        if cr >= 0:
            lines[i] = line[cr + 1 :]
    return "\n".join(lines)


def coalesce_streams(outputs: list) -> list:
    """One output per stream of a cell, however the kernel's writes were split in time (so the same
    notebook gives the same feedback on any machine and engine), carriage returns applied and stdout
    before stderr when they follow each other: what nbclient's ``coalesce_streams`` does, in time
    linear in the output."""
    merged: list = []
    streams: dict = {}
    for output in outputs:
        if output["output_type"] != "stream":
            merged.append(output)
        elif output["name"] in streams:
            streams[output["name"]]["text"] += output["text"]
        else:
            merged.append(output)
            streams[output["name"]] = output
    for output in streams.values():
        # Backspaces stay: nbclient's loop meant to apply them never runs (its condition is false at
        # its start), and feedback must not change.
        output["text"] = _carriage_returns(output["text"])
    for i, output in enumerate(merged):
        if output["output_type"] == "stream" and output["name"] == "stderr":
            following = merged[i + 1] if i + 1 < len(merged) else None
            if (
                following is not None
                and following["output_type"] == "stream"
                and following["name"] == "stdout"
            ):
                merged.insert(i, merged.pop(i + 1))
    return merged


class ExecuteRecordingDeaths(Execute):
    """nbgrader's Execute, with three additions:

    * it records the cell whose kernel died (a :class:`grading.protocol.Death`) in its ``death_file``;
    * what a cell outputs is cut to an :class:`OutputBudget` as it arrives, with a note when it was;
    * one output per stream and cell (:func:`coalesce_streams`).
    """

    coalesce_streams = Bool(False)  # done by coalesce_streams() below, after the cell, in linear time
    death_file = Unicode("", help="where to record the cell whose kernel died (none: not recorded)").tag(
        config=True
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._budget = OutputBudget()

    def process_message(self, msg, cell, cell_index):
        self._budget.capture(msg)
        return super().process_message(msg, cell, cell_index)

    def preprocess_cell(self, cell, resources, index):
        self._budget = OutputBudget()
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            if self.death_file:
                Death(index, grade_id(cell)).write(self.death_file)
            raise
        if cell.cell_type == "code" and cell.outputs:
            cell.outputs = coalesce_streams(cell.outputs)
            note = self._budget.note()
            if note:
                cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=note))
        return cell, resources


class WarningsDoNotFail(Preprocessor):
    """Shows a test cell's stderr output as ordinary output, so that only an error fails the test.

    nbgrader scores a test cell 0 when any of its output went to stderr (``nbgrader.utils.determine_grade``).
    Our tests fail by raising; what reaches stderr is a warning — a Python ``warnings.warn`` in the
    learner's code (``UserWarning: ...``), anything else a library writes there — and the same cell
    passes its self-check on Colab. The text stays in the feedback. (XLA's C++ log, such as "Involuntary
    full rematerialization" while a grader compiles its own program, is silenced at its source: worker.py
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
