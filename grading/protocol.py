"""Everything that crosses a process boundary while a notebook is graded, named once.

Grading a notebook runs in three kinds of process: the driver's worker (grading/worker.py), an
nbgrader command forked from the nbgrader server (grading/nbgrader_process.py), and the learner's
kernel that nbgrader starts (in the sandbox, grading/sandbox.py). What travels between them:

* worker → nbgrader: **config options** of this course's preprocessors, given on nbgrader's command
  line (:func:`autograde_options`): the cells to skip (``SkipCells.skip``), where a dead kernel is
  recorded (``ExecuteRecordingDeaths.death_file``) and the cell time limit (nbgrader's
  ``Execute.timeout``).
* nbgrader → worker: a :class:`Death` (the cell whose kernel died), written as JSON to that file.
* kernel → worker: a :class:`Tampering` (the checking tools a notebook replaced), raised in the kernel
  by grading/tamper.py as a ``CheckFailed`` message and read back from the graded notebook's error
  output; :meth:`Tampering.message` writes it and :meth:`Tampering.parse` reads it.
* nbgrader ↔ kernel, around each test cell (grading/preprocessors.py ``HardenTests`` and
  ``ExecuteRecordingDeaths``, grading/tamper.py): the cell's **prologue** (between ``PROLOGUE_BEGIN``
  and ``PROLOGUE_END``) and its **epilogue** (``EPILOGUE_BEGIN`` … ``PROLOGUE_END``), whose last line
  displays a random token chosen outside the kernel for this cell and this run as a ``PROOF_MIME``
  output: a test cell that ends without an error and without its token did not run its checks
  (``NO_PROOF_ENAME``, ``NO_PROOF_MESSAGE``). Before the cell, what the notebook changed in how IPython
  runs a cell is undone; the kernel says what it undid, and nbgrader shows it as the cell's first
  output (``UNDONE_PREFIX``).
* **environment variables**, only where no configuration can reach: ``COURSE_ROOT_ENV`` locates the
  course for ``nbgrader_config.py`` before any configuration is loaded, and for the kernel's own code;
  the sandbox's settings (``SANDBOX_ENV``, ``UID_ENV``, ``NPROC_ENV``) are read by
  grading/nbgrader_config.py and ``SandboxedKernelManager``, and are per-notebook values set by the
  worker beside the rest of the kernel's environment (grading/sandbox.py ``kernel_env``).

This module imports nothing of nbgrader or the course: the kernel imports it too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: The course root (a scratch course when grading); nbgrader_config.py, the sandbox and the kernel read it.
COURSE_ROOT_ENV = "SHARDBOOK_COURSE_ROOT"
SANDBOX_ENV = "SHARDBOOK_SANDBOX"  # "1": nbgrader starts kernels sandboxed
UID_ENV = "SHARDBOOK_SANDBOX_UID"  # the uid the kernel runs as (root only)
NPROC_ENV = "SHARDBOOK_SANDBOX_NPROC"  # the process limit of the kernel's uid
#: Variables of grading that the learner's kernel must not see.
GRADING_ONLY_ENV = (SANDBOX_ENV, UID_ENV, NPROC_ENV)

#: Seconds a cell may run when nothing says otherwise (``make grade --cell-timeout``).
DEFAULT_CELL_TIMEOUT = 120
#: The markers around what grading adds to a test cell (feedback pages drop both blocks).
PROLOGUE_BEGIN = "# >>> added when graded: fresh checking tools, whatever the notebook redefined"
PROLOGUE_END = "# <<< end of what grading added"
EPILOGUE_BEGIN = "# >>> added when graded: proof that this test cell ran to its end"
#: The kind of output that carries a test cell's token (never shown on a feedback page).
PROOF_MIME = "application/vnd.shardbook.proof"
#: The error a test cell gets when it ended without error but without its token: it scores 0.
NO_PROOF_ENAME = "TestDidNotRun"
NO_PROOF_MESSAGE = (
    "this test gave no proof that its checks ran to their end (grading adds a last line to each test "
    "cell that reports back, and it never reported). Code in an earlier cell changed how cells run "
    "(an IPython input or AST transformer, an event callback, a replaced traceback or display "
    "function, a trace function), so this test scores 0. Remove that code and run the notebook again."
)
#: The same error's message for a test cell whose kernel replied that it raised, while no error reached
#: its output (code called by the test set a handler that hides errors): it scores 0 too.
HIDDEN_ERROR_MESSAGE = (
    "this test raised an error, but code in this notebook kept the error from showing (an IPython "
    "custom exception handler or a replaced traceback function, set by code the test called), so this "
    "test scores 0. Remove that code and run the notebook again."
)
#: The first output of a test cell before which grading undid the notebook's changes to IPython.
UNDONE_PREFIX = "[undone before this test, as it changed how cells run:"

#: How the worker's notes on a notebook that interfered with its tests begin (worker._error_notes
#: writes them; the class report flags a learner whose notes hold one).
NO_PROOF_NOTE = "gave no proof that its checks ran"
UNDONE_NOTE = "the notebook changed how IPython runs cells"
TAMPERED_NOTE = "the notebook replaced checking tools"
INTERFERED_NOTES = (NO_PROOF_NOTE, UNDONE_NOTE, TAMPERED_NOTE)

#: The file a dead kernel is recorded in, beside the scratch course (not in it: the learner's code
#: cannot reach it from the sandbox).
DEATH_FILE_NAME = "death.json"


def autograde_options(
    skip: list[int], death_file: Path, cell_timeout: int, endless: list[int] | None = None
) -> list[str]:
    """nbgrader command-line options for one autograde attempt (traitlets ``--Class.trait=value``):
    ``skip``, the cells that killed the kernel; ``endless``, those that never stopped, even when
    interrupted."""
    options = [f"--ExecuteRecordingDeaths.death_file={death_file}", f"--Execute.timeout={int(cell_timeout)}"]
    options += [f"--SkipCells.skip={index}" for index in skip]
    return options + [f"--SkipCells.endless={index}" for index in endless or []]


@dataclass(frozen=True)
class Death:
    """The cell whose kernel died while nbgrader executed it: its index, and its grade_id if it has one.
    ``endless``: the kernel did not die, but the cell never stopped, even when interrupted at the cell
    limit (a loop whose bare ``except:`` also catches KeyboardInterrupt); its kernel was killed."""

    index: int
    grade_id: str | None = None
    endless: bool = False

    def to_json(self) -> str:
        return json.dumps({"index": self.index, "grade_id": self.grade_id, "endless": self.endless})

    @classmethod
    def from_json(cls, text: str) -> Death:
        data = json.loads(text)
        return cls(
            index=int(data["index"]), grade_id=data.get("grade_id") or None, endless=bool(data.get("endless"))
        )

    def write(self, path: Path | str) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def read(cls, path: Path) -> Death | None:
        """The death recorded at ``path``, or None when none was."""
        return cls.from_json(path.read_text()) if path.exists() else None

    def where(self) -> str:
        """``cell 7 (shape_test)``: how a note names the cell."""
        return f"cell {self.index}" + (f" ({self.grade_id})" if self.grade_id else "")


@dataclass(frozen=True)
class Tampering:
    """The checking tools a notebook replaced, each with where the fake came from."""

    found: tuple[str, ...]

    PREFIX = "code in this notebook replaced tools the tests rely on: "
    SUFFIX = ". Tests cannot pass while that code is there: remove it and run the notebook again."

    def message(self) -> str:
        """The CheckFailed message the kernel raises (what the learner reads on the feedback page)."""
        return self.PREFIX + "; ".join(self.found) + self.SUFFIX

    @classmethod
    def parse(cls, evalue: str) -> Tampering | None:
        """The finding in an error's message, or None when the message is not one :meth:`message` wrote
        (anything may come before it: the error's own prefix)."""
        start, end = evalue.find(cls.PREFIX), evalue.rfind(cls.SUFFIX)
        if start < 0 or end < start:
            return None
        return cls(tuple(evalue[start + len(cls.PREFIX) : end].split("; ")))

    def summary(self) -> str:
        return "; ".join(self.found)
