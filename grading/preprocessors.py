"""nbgrader preprocessors of this course: feedback without hidden tests, and grading that survives
a cell that kills its kernel.

HideHiddenTests (feedback). nbgrader's autograded notebook holds the full source of every test
cell, hidden tests included, and tracebacks that quote it. Before feedback HTML is written, this preprocessor
  * replaces each hidden-test block of a test cell with one comment line,
  * shortens the error output of every test cell to what the learner saw on Colab without its cell
    lines (:func:`feedback_lines`): a check's ``CheckFailed: message`` (expected, got, hint), a known
    mistake's sentence and hint; the traceback would only show grader code; and
  * removes from every output of every cell each line of a hidden test the output reproduces
    (:func:`redact`): whatever the learner's code printed, the page never shows hidden-test source.
"""

from __future__ import annotations

import ast
import html
import json
import re
import secrets
from queue import Empty
from time import monotonic

import nbformat
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import Execute
from traitlets import Bool, Int, List, Unicode

from grading.assignment import IMPORTS, grade_id, hidden_blocks, hide_hidden_tests, is_test
from grading.protocol import (
    EPILOGUE_BEGIN,
    HIDDEN_ERROR_MESSAGE,
    NO_PROOF_ENAME,
    NO_PROOF_MESSAGE,
    PROLOGUE_BEGIN,
    PROLOGUE_END,
    PROOF_MIME,
    UNDONE_PREFIX,
    Death,
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

PROLOGUE_BLOCK = re.compile(rf"^{re.escape(PROLOGUE_BEGIN)}\n.*?^{re.escape(PROLOGUE_END)}\n", re.S | re.M)
#: The epilogue with the line break HardenTests put before it (so the cell's own source comes back whole).
EPILOGUE_BLOCK = re.compile(rf"\n{re.escape(EPILOGUE_BEGIN)}\n.*?^{re.escape(PROLOGUE_END)}\n", re.S | re.M)
#: The epilogue's line that displays the cell's token (tamper.prove), read back outside the kernel.
PROOF_CALL = re.compile(r"^_grading_prove\('([0-9a-f]+)'\)$", re.M)
#: A hidden-test line shorter than this is not looked for in outputs: it says nothing on its own
#: (``)``, ``else:``) and would cut innocent output.
MIN_REDACTED_CHARS = 12
REDACTED = "[a line of a hidden test: not shown]"


class HideHiddenTests(Preprocessor):
    """Removes hidden-test source and test-cell tracebacks from a notebook before it becomes feedback,
    and every hidden-test line that any output reproduces."""

    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled; nbgrader registers them as is

    _hidden: list[str] | None = None  # the notebook's (preprocess); else the cell's own

    def preprocess(self, nb, resources):
        self._hidden = hidden_lines(nb)
        try:
            return super().preprocess(nb, resources)
        finally:
            self._hidden = None

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        hidden = (
            self._hidden if self._hidden is not None else hidden_lines(nbformat.v4.new_notebook(cells=[cell]))
        )
        test = is_test(cell)
        if test:
            source = EPILOGUE_BLOCK.sub("", PROLOGUE_BLOCK.sub("", cell.source))
            cell.source = hide_hidden_tests(source)
        for output in cell.get("outputs", []):
            redact(output, hidden)
            if test and output.get("output_type") == "error":
                output["traceback"] = feedback_lines(output.get("ename", "Error"), output.get("evalue", ""))
        return cell, resources


def hidden_lines(nb) -> list[str]:
    """The lines of the notebook's hidden tests worth looking for in its outputs: stripped, at least
    MIN_REDACTED_CHARS long, and not also in the visible part of a test cell (the learner has those);
    longest first."""
    hidden: set[str] = set()
    public: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and is_test(cell):
            for block in hidden_blocks(cell.source):
                hidden |= {line.strip() for line in block.splitlines()}
            public |= {line.strip() for line in hide_hidden_tests(cell.source).splitlines()}
    return sorted((h for h in hidden - public if len(h) >= MIN_REDACTED_CHARS), key=len, reverse=True)


def _spellings(line: str) -> list[str]:
    """How a line may appear in an output: as is, escaped for HTML, inside a repr or a JSON string."""
    forms = [line, html.escape(line), html.escape(line, quote=False)]
    forms += [json.dumps(line)[1:-1], repr(line)[1:-1]]
    return list(dict.fromkeys(forms))


def _redact_text(text: str, hidden: list[str]) -> str:
    plain = _ANSI.sub("", text) if "\x1b" in text else text
    if not any(form in plain for line in hidden for form in _spellings(line)):
        return text
    for line in hidden:
        for form in _spellings(line):
            plain = plain.replace(form, REDACTED)
    return plain  # colours are dropped where a line was cut


def redact(output: dict, hidden: list[str]) -> None:
    """Replaces, in one output (printed text, an error, a displayed result), every hidden-test line it
    reproduces with REDACTED."""
    if not hidden:
        return
    for key in ("text", "evalue"):
        if isinstance(output.get(key), str):
            output[key] = _redact_text(output[key], hidden)
    if isinstance(output.get("traceback"), list):
        output["traceback"] = [_redact_text(str(line), hidden) for line in output["traceback"]]
    data = output.get("data") or {}
    for mime, value in list(data.items()):
        if isinstance(value, list):  # a text split in lines, as nbformat may store it
            value = "".join(value)
        if isinstance(value, str):
            data[mime] = _redact_text(value, hidden)
        elif _redact_text(json.dumps(value), hidden) != json.dumps(value):
            data[mime] = {"redacted": REDACTED}


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
SKIPPED_ENDLESS_SOURCE = (
    "raise RuntimeError(\n"
    '    "When this notebook was graded, this cell ran past the time limit and never stopped, even "\n'
    '    "when interrupted, so it was skipped and its points are 0. A loop whose bare except: also "\n'
    '    "catches KeyboardInterrupt does this: catch Exception instead, and give the loop an end."\n'
    ")\n"
)
SKIPPED_SOURCES = (SKIPPED_CELL_SOURCE, SKIPPED_ENDLESS_SOURCE)


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

    The worker (grading/worker.py) lists there the cells that killed the kernel in an earlier attempt
    (``skip``) and those that never stopped, even when interrupted (``endless``), so the rest of the
    notebook can still be executed and graded (grading/protocol.py).
    """

    enabled = Bool(True)
    skip = CellIndices(help="indices of the cells to replace before execution").tag(config=True)
    endless = CellIndices(help="indices of cells that ignored the interrupt, to replace").tag(config=True)

    def preprocess(self, nb, resources):
        for indices, source in ((self.skip, SKIPPED_CELL_SOURCE), (self.endless, SKIPPED_ENDLESS_SOURCE)):
            for index in set(indices):
                if 0 <= index < len(nb.cells) and nb.cells[index].cell_type == "code":
                    nb.cells[index].source = source
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
        if PROOF_MIME in data:  # a test's proof is never cut (it is removed after the cell)
            return
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


#: What the kernel evaluates around each test cell, as ``user_expressions`` of an execute request with
#: no code (which no input transformer, AST transformer or cell event sees). Each first drops the
#: cached grading modules, as the prologue does, so a planted module is not what runs (18 ms a call on
#: this course's machine; with shardbook's, which the prologue drops anyway, 70 ms).
#: The kernel evaluates it in the learner's namespace, so it names nothing there: not even a built-in
#: (a notebook that defines ``__import__`` or ``list`` would answer for it, and keep its hooks). It
#: reaches ``sys`` and the import function through ``importlib._bootstrap``, found from ``object``'s
#: subclasses by attribute alone (``_IMPORTLIB``), and uses only local names.
_IMPORTLIB = (
    "[c for c in ().__class__.__base__.__subclasses__() "
    "if c.__module__ == '_frozen_importlib' and c.__name__ == 'ModuleSpec'][0].__init__.__globals__"
)
_FRESH_TAMPER = (
    "(lambda g: [g['sys'].modules.pop(m) for m in [*g['sys'].modules] if m.split('.')[0] == 'grading'] "
    f"and None or g['_gcd_import']('grading.tamper'))({_IMPORTLIB})"
)
RESET_EXPRESSION = f"{_FRESH_TAMPER}.reset_ipython()"
FORGET_EXPRESSION = f"{_FRESH_TAMPER}.forget_tests()"
#: Seconds the kernel has to answer one of them (it is idle between cells; the imports are cached).
KERNEL_CALL_TIMEOUT = 30


class ExecuteRecordingDeaths(Execute):
    """nbgrader's Execute, with these additions:

    * it records the cell whose kernel died (a :class:`grading.protocol.Death`) in its ``death_file``,
      and the cell that never stopped, even when interrupted at the cell limit (``endless``; nbclient
      would give up on the notebook);
    * what a cell outputs is cut to an :class:`OutputBudget` as it arrives, with a note when it was;
    * one output per stream and cell (:func:`coalesce_streams`), each hidden-test line it reproduces
      removed (:func:`redact`);
    * around each test cell (one that HardenTests gave a token): before it, the kernel undoes what the
      notebook changed in how IPython runs a cell (``grading.tamper.reset_ipython``; what it undid
      becomes the cell's first output); the cell runs without being stored in the input history; after
      it, the kernel forgets its source (``tamper.forget_tests``), and the cell must have displayed its
      token: its proof output is removed, and a cell that ended without error and without it gets a
      ``NO_PROOF_ENAME`` error (it scores 0).
    """

    coalesce_streams = Bool(False)  # done by coalesce_streams() below, after the cell, in linear time
    death_file = Unicode("", help="where to record the cell whose kernel died (none: not recorded)").tag(
        config=True
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._budget = OutputBudget()

    def preprocess(self, nb, resources, *args, **kwargs):
        self._hidden = hidden_lines(nb)  # before any cell runs: the test cells as the instructor wrote them
        return super().preprocess(nb, resources, *args, **kwargs)

    def process_message(self, msg, cell, cell_index):
        self._budget.capture(msg)
        return super().process_message(msg, cell, cell_index)

    async def _check_raise_for_error(self, cell, cell_index, exec_reply):
        # The kernel's own word on whether the cell raised, whatever reached its outputs.
        self._reply_status = ((exec_reply or {}).get("content") or {}).get("status")
        return await super()._check_raise_for_error(cell, cell_index, exec_reply)

    async def _async_handle_timeout(self, timeout, cell=None):
        self._interrupted = True
        return await super()._async_handle_timeout(timeout, cell)

    async def _async_in_kernel(self, expression: str) -> str | None:
        """The text the kernel's ``user_expressions`` evaluation of ``expression`` gave, or None."""
        assert self.kc is not None
        msg_id = await ensure_async(
            self.kc.execute("", silent=True, store_history=False, user_expressions={"r": expression})
        )
        deadline = monotonic() + KERNEL_CALL_TIMEOUT
        while (left := deadline - monotonic()) > 0:
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=min(left, 1.0)))
            except Empty:
                await self._async_check_alive()  # DeadKernelError: recorded as this cell's death
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                found = (msg["content"].get("user_expressions") or {}).get("r") or {}
                text = (found.get("data") or {}).get("text/plain") if found.get("status") == "ok" else None
                try:  # the repr of the str the expression returned
                    value = ast.literal_eval(text) if isinstance(text, str) else None
                except (ValueError, SyntaxError):
                    return None
                return value if isinstance(value, str) else None
        return None

    _in_kernel = run_sync(_async_in_kernel)

    def preprocess_cell(self, cell, resources, index):
        self._budget = OutputBudget()
        self._interrupted = False
        self._reply_status = None
        proof = PROOF_CALL.search(cell.source) if cell.cell_type == "code" else None
        undone = None
        self._check_assign_resources(resources)
        try:
            if proof:
                undone = self._in_kernel(RESET_EXPRESSION)
            cell = self.execute_cell(
                cell, index, execution_count=self.code_cells_executed + 1, store_history=not proof
            )
            if proof:
                self._in_kernel(FORGET_EXPRESSION)
        except DeadKernelError:
            if self.death_file:
                Death(index, grade_id(cell)).write(self.death_file)
            raise
        except CellTimeoutError:  # nbclient's "Timeout waiting for IOPub output"
            if self._interrupted and self.death_file:  # the kernel never became idle, even interrupted
                Death(index, grade_id(cell), endless=True).write(self.death_file)
            raise
        if cell.cell_type == "code":
            settle_proof(cell, proof[1] if proof else None, raised=self._reply_status == "error")
            for output in cell.outputs:  # so no report, class report or LMS comment holds one either
                redact(output, getattr(self, "_hidden", []))
        if cell.cell_type == "code" and cell.outputs:
            cell.outputs = coalesce_streams(cell.outputs)
            note = self._budget.note()
            if note:
                cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=note))
        if undone:  # an output of its own, first: the worker reads it back
            text = f"{UNDONE_PREFIX} {' '.join(undone.split())}]\n"
            cell.outputs.insert(0, nbformat.v4.new_output("stream", name="stdout", text=text))
        return cell, self.resources


def settle_proof(cell, token: str | None, raised: bool = False) -> None:
    """Removes every proof output of a cell; a test cell (``token``) that ended without an error and
    without displaying its token gets the error that scores it 0, and so does one whose kernel replied
    that it raised (``raised``) while no error reached its outputs (a hidden error: the token it showed
    may have been read from the cell's text by the code it called)."""
    outputs = cell.get("outputs", [])
    proofs = [o for o in outputs if PROOF_MIME in (o.get("data") or {})]
    cell.outputs = [o for o in outputs if o not in proofs]
    if token is None or any(o.get("output_type") == "error" for o in cell.outputs):
        return
    message = HIDDEN_ERROR_MESSAGE if raised else NO_PROOF_MESSAGE
    if raised or not any(o["data"][PROOF_MIME] == token for o in proofs):
        line = f"{NO_PROOF_ENAME}: {message}"
        error = {"ename": NO_PROOF_ENAME, "evalue": message, "traceback": [line]}
        cell.outputs.append(nbformat.v4.new_output("error", **error))


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
    """Before each test cell, re-imports the checking tools fresh and checks nothing was replaced;
    after it, the proof that it ran to its end.

    The prologue drops every cached ``grading`` and ``shardbook`` module (so a patched grader or check
    is thrown away), runs :func:`grading.tamper.assert_untampered`, then re-runs the released imports
    cell, so names the learner redefined (``expect_equal``, ``np``, ``P`` …) mean what the test
    expects. The epilogue displays a token chosen here, outside the kernel, for this cell and this run
    (:func:`grading.tamper.prove`; ``ExecuteRecordingDeaths`` requires it). Feedback pages show neither.
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
                "from grading.tamper import prove as _grading_prove",
                "_grading_assert_untampered()",
                imports,
                PROLOGUE_END,
                "",
            ]
        )
        for cell in nb.cells:
            if cell.cell_type == "code" and is_test(cell) and cell.source not in SKIPPED_SOURCES:
                epilogue = [EPILOGUE_BEGIN, f"_grading_prove({secrets.token_hex(16)!r})", PROLOGUE_END]
                cell.source = prologue + cell.source + "\n" + "\n".join(epilogue) + "\n"
        return nb, resources
