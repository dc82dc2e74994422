"""What was handed in: which files of a folder are graded, the learner id each file name gives, whose
assignment a notebook is, and the earlier hand-ins of a learner graded again.

A learner id names folders (``grading/autograded/<learner>/``), files (``feedback/<learner>.html``),
the learner in nbgrader's gradebook and on nbgrader's command line (``--student=<learner>``, a file
glob to nbgrader). The file name it comes from is the learner's own choice, so :func:`learner_id` makes
it safe for all of these whatever it was, and keeps it readable:

>>> learner_id("ada_lovelace.ipynb"), learner_id("José Núñez.ipynb"), learner_id("--help.ipynb")
('ada_lovelace', 'José_Núñez', '__help')

Two files whose ids are the same, or differ only by case (one file on macOS or Windows), are a clash
(:func:`clashes`): the batch stops before anything is graded and the message names the files.
"""

from __future__ import annotations

import filecmp
import hashlib
import shutil
import unicodedata
from pathlib import Path

import nbformat

from grading.assignment import Assignment, Kind, kind, reads_download
from grading.record import ReportFolder

#: What every notebook's file name ends with (in any case: ``UPPER_CASE.IPYNB`` is a notebook too).
SUFFIX = ".ipynb"
#: The longest learner id, in UTF-8 bytes: ``<learner>.html`` and nbgrader's paths stay far below the
#: 255 bytes a file name may have.
MAX_ID_BYTES = 96
#: Characters kept as they are besides Unicode letters, marks and digits.
_KEPT = "_-."
_HASH_CHARS = 8


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:_HASH_CHARS]


def _kept(char: str) -> bool:
    return char in _KEPT or unicodedata.category(char)[0] in "LMN"


def learner_id(file_name: str) -> str:
    """The learner id of a file handed in: its name without ``.ipynb``, safe as a path component and
    as a command-line value, and readable.

    The name is put in Unicode's composed form (NFC); letters, combining marks and digits of any
    script, ``_``, ``-`` and ``.`` are kept; every other character (spaces, punctuation, glob
    characters, control and direction marks, ``/``) becomes ``_``. A leading ``-`` or ``.`` becomes
    ``_`` (no id reads as an option or a hidden or parent folder), and so does a final ``.``. A name
    with no letter or digit left becomes ``learner_<hash>``, and a name longer than
    :data:`MAX_ID_BYTES` keeps its start and ends ``_<hash>`` (8 hex digits of SHA-256 of the whole
    name), so two such names stay apart.
    """
    stem = file_name[: -len(SUFFIX)] if file_name.lower().endswith(SUFFIX) else file_name
    stem = unicodedata.normalize("NFC", stem)
    safe = "".join(c if _kept(c) else "_" for c in stem)
    lead = len(safe) - len(safe.lstrip("-."))
    trail = len(safe) - len(safe.rstrip("."))  # a name's final dot, which Windows drops
    safe = "_" * lead + safe[lead : len(safe) - trail] + "_" * trail if lead < len(safe) else "_" * len(safe)
    if not any(unicodedata.category(c)[0] in "LN" for c in safe):
        return f"learner_{_digest(stem)}"
    if len(safe.encode("utf-8")) > MAX_ID_BYTES:
        keep = safe
        while len(keep.encode("utf-8")) > MAX_ID_BYTES - _HASH_CHARS - 1:
            keep = keep[:-1]
        safe = f"{keep}_{_digest(stem)}"
    return safe


def is_notebook(path: Path) -> bool:
    """A file whose name ends ``.ipynb`` in any case."""
    return path.name.lower().endswith(SUFFIX) and path.is_file()


def folder_contents(folder: Path) -> tuple[list[Path], list[str]]:
    """The notebooks of a folder of hand-ins, by name, and the names of everything else in it (files
    with another ending, ``x.ipynb.txt``, a ``.zip``, sub-folders), which are not graded."""
    notebooks, skipped = [], []
    for path in sorted(folder.iterdir()):
        if is_notebook(path):
            notebooks.append(path)
        else:
            skipped.append(path.name + ("/" if path.is_dir() else ""))
    return notebooks, skipped


def skipped_line(skipped: list[str]) -> str:
    """What the driver prints about the entries of the folder it does not grade."""
    zips = [s for s in skipped if s.lower().endswith(".zip")]
    hint = "; unpack the .zip first if it holds notebooks" if zips else ""
    return f"not graded, {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} not ending .ipynb: " + (
        ", ".join(repr(s) for s in skipped) + hint
    )


def clashes(files: list[Path]) -> list[str]:
    """One sentence per group of files that would be one learner: the same id, or ids that differ only
    by case (one file on a case-insensitive file system). Empty when every file is a learner of its own."""
    groups: dict[str, list[Path]] = {}
    for path in files:
        groups.setdefault(learner_id(path.name).casefold(), []).append(path)
    said = []
    for group in groups.values():
        if len(group) > 1:
            ids = sorted({learner_id(p.name) for p in group})
            names = ", ".join(repr(p.name) for p in group)
            alike = f"the learner id {ids[0]!r}" if len(ids) == 1 else f"ids differing only by case {ids}"
            said.append(f"{names} give {alike}")
    return said


# ---------------------------------------------------------------------------------------------------
# Whose assignment a notebook is


def _lines(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _released_texts(root: Path) -> dict[str, set[str]]:
    """assignment -> the texts of its released cells that no other assignment has (markdown and locked
    or test code, each stripped), which a learner's download keeps as released."""
    texts: dict[str, set[str]] = {}
    for folder in sorted((root / "exercises").iterdir()):
        if not folder.is_dir() or not list(folder.glob("*.ipynb")):
            continue
        cells = Assignment.release(folder.name, root).cells
        texts[folder.name] = {
            _lines(c.source) for c in cells if kind(c) is not Kind.ANSWER and c.source.strip()
        }
    shared = {t for a, own in texts.items() for t in own if any(t in o for b, o in texts.items() if b != a)}
    return {a: own - shared for a, own in texts.items()}


class Assignments:
    """The released cells of every assignment of a course, to tell whose notebook a hand-in is."""

    def __init__(self, root: Path):
        self.texts = _released_texts(root)

    def matches(self, notebook: nbformat.NotebookNode) -> dict[str, float]:
        """assignment -> the fraction of its own released cells found unchanged in ``notebook``."""
        found = {_lines(c.source) for c in notebook.cells}
        return {a: len(own & found) / len(own) for a, own in self.texts.items() if own}

    def other(self, data: bytes, assignment: str) -> str | None:
        """The note for a notebook that is another assignment's: most of that assignment's own released
        cells are in it and few of ``assignment``'s; None otherwise (unreadable files included: the
        worker says what is wrong with them)."""
        try:
            notebook = reads_download(data.decode("utf-8"))
        except Exception:
            return None
        share = self.matches(notebook)
        if not share:
            return None
        best = max(share, key=lambda a: share[a])
        mine = share.get(assignment, 0.0)
        if best == assignment or share[best] < 0.5 or mine >= 0.25:
            return None
        return (
            f"the notebook could not be matched to the assignment: it is assignment {best}'s notebook "
            f"({share[best]:.0%} of that assignment's own cells are in it, {mine:.0%} of {assignment}'s); "
            f"not graded, scored 0: ask for the notebook of {assignment}."
        )


# ---------------------------------------------------------------------------------------------------
# Earlier hand-ins


def stored(reports: ReportFolder, learner: str) -> Path:
    """Where the file a learner handed in last is kept as handed in (grading/reports.py writes it)."""
    return reports.submission(learner)


def keep_history(reports: ReportFolder, learner: str, new: Path) -> Path | None:
    """Before ``new``, a file of a learner graded before, is stored and graded: copies the earlier file
    (``submissions/<learner>.ipynb``), its kept results (``learners/<learner>.json``) and its feedback
    page into ``history/<learner>/<n>.ipynb``, ``<n>.json``, ``<n>.html`` (n = 1, 2, … in order).

    Returns the earlier file's copy, or None when nothing was kept: no earlier file, or the same bytes.
    """
    last = stored(reports, learner)
    if not last.is_file() or filecmp.cmp(last, new, shallow=False):
        return None
    folder = reports.history_of(learner)
    folder.mkdir(parents=True, exist_ok=True)
    n = 1 + max((int(p.stem) for p in folder.glob("*.ipynb") if p.stem.isdigit()), default=0)
    for earlier, ending in (
        (last, "ipynb"),
        (reports.record_path(learner), "json"),
        (reports.page(learner), "html"),
    ):
        if earlier.is_file():
            shutil.copy2(earlier, folder / f"{n}.{ending}")
    return folder / f"{n}.ipynb"
