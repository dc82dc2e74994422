"""The committed submissions the grading tests hand in, and an in-process grader for the answer-only ones.

Two kinds live in ``tests/submissions/<assignment>/``:

* ``wrong_*.py`` / ``ok_*.py`` — answer-only submissions. A docstring says the mistake; ``EXPECTED``
  (a literal dict, read with ``ast.literal_eval``) says what must happen when it is graded: the
  ``lost`` grade_ids score 0, every other test cell full marks, ``feedback`` texts appear in what the
  test cells print or raise, ``notes`` in the grading report; ``waits`` (seconds) marks one whose
  grading mostly waits (a collective no other process joins, until JAX gives up), which the tests
  grade in a process of its own beside the others. Then come only the answers that differ
  from the reference solution: a top-level ``def`` named after an answer cell's grade_id starts that
  cell's new source, which runs to the next such ``def`` (private helpers of the answer included).
  :func:`notebook` builds the notebook a learner would hand in: the released exercise notebook, every
  answer from the solution except the replaced ones (:func:`colab_bytes`: as Colab downloads it).
* ``*.ipynb`` — whole notebooks for what only a notebook can show (a broken file, mangled cells,
  tampering), with their expectations in ``expected.json`` beside them. Each name is described once:
  in its ``.py`` or in ``expected.json``, never both.

:func:`grade_in_process` grades notebooks the way nbgrader's autograde does — the learner's cells in
order, each test cell with the instructor's source (hidden tests included) behind the same hardening
prologue (``grading.preprocessors.HardenTests``), an exception scoring that cell 0 — but in this one
Python process, without nbgrader, a kernel or the sandbox. ``python -m tests.submissions grade <a>``
does it for one assignment in a fresh process; ``python -m tests.submissions convert <a>`` turns an
assignment's ``wrong_*.ipynb`` into answer-only ``.py`` files.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import json
import pprint
import re
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from grading.assignment import Assignment, grade_id, is_answer, metadata, run_cell, strip_solution_markers
from tests import notebooks

if TYPE_CHECKING:
    from grading.mutants import Notebook
    from grading.parity import Recorder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXPECTED_JSON = "expected.json"
ANSWER_PREFIXES = ("wrong_", "ok_")


def solution_path(assignment: str, root: Path = ROOT) -> Path:
    return next((root / "solutions" / assignment).glob("*.ipynb"))


def solution_answers(assignment: str, root: Path = ROOT) -> dict[str, str]:
    """grade_id -> the instructor's answer cell source, without nbgrader's solution markers."""
    return Assignment.read(solution_path(assignment, root)).answers()


@dataclass
class Submission:
    """One committed submission: its file, what grading it must give, and (answer-only) its answers."""

    assignment: str
    name: str
    path: Path
    expected: dict
    about: str = ""
    answers: dict[str, str] = field(default_factory=dict)  # grade_id -> new cell source (.py only)

    @property
    def answer_only(self) -> bool:
        return self.path.suffix == ".py"

    def lost(self, cells: list[str]) -> set[str]:
        """The grade_ids (of ``cells``) that must score 0."""
        lost = self.expected.get("lost", [])
        return set(cells) if lost == "all" else set(lost)


class SubmissionError(ValueError):
    """A committed submission file that cannot be read as this module describes."""


def parse_answers(path: Path, answer_ids: list[str]) -> tuple[str, dict, dict[str, str]]:
    """(docstring, EXPECTED, {grade_id: new cell source}) of an answer-only submission file."""
    text = path.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise SubmissionError(f"{path}: not valid Python ({e})") from None
    lines = text.splitlines()
    doc = ast.get_docstring(tree) or ""
    if not doc:
        raise SubmissionError(f"{path}: starts with no docstring saying what the mistake is")
    expected = None
    starts: list[tuple[int, str]] = []  # (0-based first line, grade_id)
    for node in tree.body[1:]:
        if isinstance(node, ast.FunctionDef) and node.name in answer_ids:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            starts.append((first, node.name))
        elif (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["EXPECTED"]
            and not starts
        ):
            try:
                expected = ast.literal_eval(node.value)
            except ValueError:
                raise SubmissionError(f"{path}: EXPECTED must be a literal dict") from None
        elif not starts:
            what = getattr(node, "name", type(node).__name__)
            raise SubmissionError(
                f"{path}: line {node.lineno}: before the first answer only the docstring and EXPECTED may "
                f"stand, found {what!r}; answers are top-level functions named after an answer cell "
                f"({', '.join(answer_ids)})"
            )
    if not isinstance(expected, dict) or "lost" not in expected:
        raise SubmissionError(f"{path}: needs EXPECTED = {{'lost': [...], ...}} before the first answer")
    if not starts:
        raise SubmissionError(f"{path}: defines none of the answers {answer_ids}")
    names = [name for _, name in starts]
    if len(set(names)) != len(names):
        raise SubmissionError(f"{path}: defines an answer twice: {names}")
    answers = {}
    ends = [first for first, _ in starts[1:]] + [len(lines)]
    for (first, name), end in zip(starts, ends, strict=True):
        answers[name] = "\n".join(lines[first:end]).rstrip() + "\n"
    return doc, expected, answers


def load(assignment: str, root: Path = ROOT) -> dict[str, Submission]:
    """Every committed submission of an assignment, by name (the file name without its suffix)."""
    folder = root / "tests" / "submissions" / assignment
    json_path = folder / EXPECTED_JSON
    described = json.loads(json_path.read_text()) if json_path.exists() else {}
    described.pop("_about", None)
    answer_ids = list(solution_answers(assignment, root))
    found: dict[str, Submission] = {}
    for path in sorted(folder.glob("*.py")):
        doc, expected, answers = parse_answers(path, answer_ids)
        if path.stem in described:
            raise SubmissionError(f"{path.stem} is described twice: in {path.name} and in {EXPECTED_JSON}")
        found[path.stem] = Submission(assignment, path.stem, path, expected, doc, answers)
    for path in sorted(folder.glob("*.ipynb")):
        if path.stem in found:
            raise SubmissionError(f"{folder}: both {path.stem}.py and {path.name}")
        if path.stem not in described:
            raise SubmissionError(f"{path}: no entry in {EXPECTED_JSON} says what grading it must give")
        found[path.stem] = Submission(assignment, path.stem, path, described.pop(path.stem))
    if described:
        raise SubmissionError(f"{json_path}: entries for missing files: {sorted(described)}")
    return found


def answer_only(assignment: str, root: Path = ROOT) -> dict[str, Submission]:
    return {n: s for n, s in load(assignment, root).items() if s.answer_only}


def submitted_answer(assignment: str, submission: str, name: str, solution: dict | None = None) -> Any:
    """The answer ``name`` of an answer-only submission, its cells run over the reference solution's
    namespace (``solution``: that namespace if the caller has it, else the solution's answers are run)."""
    if solution is None:
        solution = vars(notebooks.answers(solution_path(assignment)))
    namespace = dict(solution)
    for gid, source in load(assignment)[submission].answers.items():
        run_cell(source, f"{submission}:{gid}", namespace)
    return namespace[name]


def assignments_with_submissions(root: Path = ROOT) -> list[str]:
    folder = root / "tests" / "submissions"
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and (root / "solutions" / p.name).is_dir())


def notebook(sub: Submission | None, assignment: str, root: Path = ROOT) -> nbformat.NotebookNode:
    """The notebook a learner hands in: the exercise with the solution's answers, ``sub``'s replaced.

    ``sub=None``: the reference solution itself. Cells keep the exercise's nbgrader metadata; use
    :func:`colab_bytes` for the shape a Colab download has.
    """
    from tools import handed_in

    solved = Assignment(handed_in.solved_notebook(assignment, root), assignment)
    try:
        return solved.with_answers(sub.answers if sub is not None else {})
    except ValueError as e:
        raise SubmissionError(f"{sub and sub.path}: {e}") from None


def colab_bytes(sub: Submission | None, assignment: str, root: Path = ROOT) -> bytes:
    """The submission as Colab's *File → Download .ipynb* saves it (no nbgrader metadata, nbformat 4.0)."""
    from tools import handed_in

    if sub is not None and not sub.answer_only:
        return sub.path.read_bytes()
    return json.dumps(handed_in.colab_download(notebook(sub, assignment, root)), indent=1).encode()


# ---------------------------------------------------------------------------------------------------
# Grading in this process


def graded_test_cells(assignment: str, root: Path = ROOT) -> dict[str, tuple[float, str]]:
    """grade_id -> (points, the source nbgrader runs) of each test cell, from the instructor's notebook."""
    return Assignment.read(solution_path(assignment, root)).tests()


def hidden_test_lines(assignment: str, root: Path = ROOT) -> set[str]:
    """The code lines of the hidden tests in an assignment's instructor notebook (stripped)."""
    return Assignment.read(solution_path(assignment, root)).hidden_test_lines()


def cells_to_run(
    nb: nbformat.NotebookNode, assignment: str, root: Path = ROOT
) -> list[tuple[str | None, str]]:
    """(grade_id, source) of each code cell as nbgrader's autograde runs it.

    Test cells get the instructor's source (nbgrader's OverwriteCells) behind the hardening prologue
    (this course's HardenTests preprocessor, the very code nbgrader is configured with).
    """
    from grading.preprocessors import HardenTests

    tests = graded_test_cells(assignment, root)
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        gid = grade_id(cell)
        if cell.cell_type == "code" and gid in tests:
            cell.source = tests[gid][1]
    nb, _ = HardenTests().preprocess(nb, {})
    return [(grade_id(c), c.source) for c in nb.cells if c.cell_type == "code"]


def grade_in_process(
    nb: nbformat.NotebookNode,
    assignment: str,
    root: Path = ROOT,
    only: set[str] | None = None,
    recorder: Recorder | None = None,
) -> dict:
    """Runs a notebook's code cells in order in a fresh namespace of this process; scores its test cells.

    Returns ``{"scores": {grade_id: points}, "output": {grade_id: text}, "seconds": {grade_id: s},
    "cpu_seconds": {grade_id: s}}`` for every test cell (its wall and CPU time in this process);
    ``output`` is what the cell printed plus, if it raised, what the feedback page shows of the error
    (``grading.preprocessors.feedback_lines``: the Colab sentence and hint, or ``ErrorName: message``);
    ``errors``: ``"cell N (grade_id)": message`` for every other cell that raised; ``diagnostics``: for a
    cell whose multi-process check stopped its workers (``shardbook.hosts.run_check``), every thread's
    Python stack in each, JAX's frames too (never part of the grade or the feedback).
    ``only``: run only these test cells (every other cell runs). ``recorder`` (a
    ``grading.parity.Recorder``, entered): each answer cell runs as its probed source and each test
    cell's calls of its functions are recorded (:func:`grade_assignment` with ``parity``).
    """
    tests = graded_test_cells(assignment, root)
    # The hardening prologue drops the course's modules from sys.modules: put back this process's own
    # afterwards, or objects made before (a Report, a CheckFailed) would stop matching their classes.
    mine = {k: v for k, v in sys.modules.items() if k.split(".")[0] in ("grading", "shardbook")}
    try:
        return _run_cells(nb, assignment, root, only, tests, recorder)
    finally:
        for k in [k for k in sys.modules if k.split(".")[0] in ("grading", "shardbook")]:
            del sys.modules[k]
        sys.modules.update(mine)


def _run_cells(
    nb, assignment: str, root: Path, only: set[str] | None, tests: dict, recorder: Recorder | None
) -> dict:
    from grading.preprocessors import feedback_lines

    namespace: dict = {"__name__": "__main__"}
    result: dict = {
        "scores": {},
        "output": {},
        "seconds": {},
        "cpu_seconds": {},
        "errors": {},
        "diagnostics": {},
    }
    for index, (gid, source) in enumerate(cells_to_run(nb, assignment, root)):
        if gid in tests and only is not None and gid not in only:
            continue
        out = io.StringIO()
        start, cpu_start = time.monotonic(), time.process_time()
        error = None
        recorded = recorder.cell(gid, namespace) if recorder else contextlib.nullcontext()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), recorded:
            try:
                run_cell(
                    recorder.source(gid, source) if recorder and gid else source,
                    f"<cell {index} {gid or ''}>",
                    namespace,
                )
            except Exception as e:  # as the feedback page shows it
                error = "\n".join(feedback_lines(type(e).__name__, str(e)))
                if stacks := getattr(e, "worker_stacks", ""):  # a multi-process check stopped them
                    result["diagnostics"][gid or f"cell {index}"] = stacks
            except (SystemExit, KeyboardInterrupt) as e:
                if not _raised_by_cell(e):
                    raise
                error = f"{type(e).__name__}: {e}"
        if recorder and gid and not error:
            recorder.wrap(namespace, gid)  # an answer cell: its function, recorded from now on
        if gid in tests:
            result["scores"][gid] = 0.0 if error else tests[gid][0]
            result["output"][gid] = out.getvalue() + (error or "")
            result["seconds"][gid] = round(time.monotonic() - start, 2)
            result["cpu_seconds"][gid] = round(time.process_time() - cpu_start, 2)
        elif error:
            result["errors"][f"cell {index} ({gid or 'no grade_id'})"] = error
    return result


def _raised_by_cell(e: BaseException) -> bool:
    """Whether an exception came from the executed cell's code (rather than from a Ctrl-C of the run)."""
    return any(
        frame.f_code.co_filename.startswith("<cell ") for frame, _ in traceback.walk_tb(e.__traceback__)
    )


def _names(source: str) -> set[str]:
    """Every identifier a cell's source uses or defines."""
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))


def affected_tests(sub: Submission, assignment: str, root: Path = ROOT) -> set[str]:
    """The test cells whose outcome can differ from the reference solution's for an answer-only file.

    Such a file only redefines answer functions (and their private helpers). A test cell can see that
    only through a name: one the replaced cells define, used by the test cell itself or by another
    answer cell (then, in turn, that answer's names). Every other test cell runs the reference's code
    on the reference's inputs, so its result is the reference's.
    """
    solution = solution_answers(assignment, root)
    changed = set(sub.answers)
    names = set().union(*(_defined(src) for src in sub.answers.values())) | changed
    grew = True
    while grew:  # an unchanged answer that calls a changed name behaves differently too
        grew = False
        for gid, src in solution.items():
            if gid not in changed and _names(src) & names:
                changed.add(gid)
                names |= _defined(src) | {gid}
                grew = True
    answer_ids = list(solution)
    return {
        gid
        for gid, (_, src) in graded_test_cells(assignment, root).items()
        if _tested_function(gid, answer_ids) in changed or _names(src) & names
    }


def _defined(source: str) -> set[str]:
    """The top-level names a cell defines (functions, classes, assignments)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def grade_assignment(
    assignment: str,
    names: list[str] | None = None,
    root: Path = ROOT,
    all_tests: bool = False,
    reference: bool = True,
    parity: bool = False,
) -> dict[str, dict]:
    """In-process results of the reference solution (``reference_solution``) and each answer-only
    submission of ``assignment`` (or those in ``names``); call in a process of its own.

    A submission runs only its :func:`affected_tests` (``all_tests``: every test cell); the others
    get the reference solution's result, and ``ran`` lists the test cells that did run. Without
    ``reference`` the reference solution is not graded, and each submission's result holds only the
    test cells that ran (:func:`merged` completes it with a reference graded elsewhere).

    ``parity``: the reference solution is graded with its answers probed and each graded function's
    calls recorded (``grading.parity``), and its result gains ``parity``: :func:`parity_of` what that
    one run recorded (tests/test_parity.py reads it).
    """
    subs = answer_only(assignment, root)
    results = {}
    if reference:
        solved = notebook(None, assignment, root)
        if parity:
            from grading import mutants
            from grading.parity import Recorder

            book = mutants.load(assignment)
            probed = {fn: mutants.probed_source(source) for fn, source in book.answers.items()}
            with Recorder(book.tests, probed) as recorder:
                results["reference_solution"] = grade_in_process(solved, assignment, root, recorder=recorder)
            results["reference_solution"]["parity"] = parity_of(book, recorder)
        else:
            results["reference_solution"] = grade_in_process(solved, assignment, root)
        results["reference_solution"]["ran"] = sorted(results["reference_solution"]["scores"])
    for name in names if names is not None else list(subs):
        if name == "reference_solution":
            continue
        sub = subs[name]
        only = None if all_tests else affected_tests(sub, assignment, root)
        got = grade_in_process(notebook(sub, assignment, root), assignment, root, only)
        got["ran"] = sorted(got["scores"])
        results[name] = merged(results["reference_solution"], got) if reference else got
    return results


def parity_of(book: Notebook, recorder: Recorder) -> dict[str, dict]:
    """Function -> ``calls`` (what its self-check and hidden tests called it with, by phase) and
    ``hardcoded``: its first hard-coding mutant (``grading.mutants.hardcoding_of``) as judged by the
    self-check alone (kind, fingerprint, diff, status, killed_by), or None where no value it reads
    varies. ``book``: the assignment's ``grading.mutants.Notebook``."""
    from grading import mutants

    judged = mutants.first_hardcoding_judged(book, recorder.found)
    out = {}
    for fn, found in recorder.found.items():
        m = judged[fn]
        kept = (
            None
            if m is None
            else {k: getattr(m, k) for k in ("kind", "fingerprint", "diff", "status", "killed_by")}
        )
        out[fn] = {"calls": found.calls, "hardcoded": kept}
    return out


def merged(reference: dict, got: dict) -> dict:
    """A submission's result for every test cell: those it ran (``got``), the reference's for the rest."""
    result: dict = {"ran": got["ran"], "errors": got["errors"]}
    for key in ("scores", "output", "seconds", "cpu_seconds"):
        result[key] = {gid: got[key].get(gid, reference[key][gid]) for gid in reference[key]}
    result["diagnostics"] = {
        **{gid: d for gid, d in reference["diagnostics"].items() if gid not in got["scores"]},
        **got["diagnostics"],
    }
    return result


# ---------------------------------------------------------------------------------------------------
# Converting whole-notebook wrong submissions into answer-only files


def _cell_answers(nb: nbformat.NotebookNode, answer_ids: list[str]) -> dict[str, str]:
    """grade_id -> source of each answer cell of a submitted notebook.

    By nbgrader metadata where the cell has it, else (a Colab download) by the answer function the
    cell defines at top level.
    """
    found: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if is_answer(cell):
            found[str(grade_id(cell))] = strip_solution_markers(cell.source)
            continue
        if metadata(cell):
            continue
        try:
            names = [n.name for n in ast.parse(cell.source).body if isinstance(n, ast.FunctionDef)]
        except SyntaxError:
            continue
        defined = [n for n in names if n in answer_ids]
        if len(defined) == 1:
            found.setdefault(defined[0], cell.source)
    return found


def _tested_function(grade_id: str, answer_ids: list[str]) -> str | None:
    """The answer a test cell checks: the longest answer name ``n`` with grade_id ``test_<n>_...``."""
    names = [n for n in answer_ids if grade_id.startswith(f"test_{n}_")]
    return max(names, key=len) if names else None


def _humanize(name: str) -> str:
    words = name.split("_", 1)[1].replace("_", " ") if "_" in name else name
    return words[:1].upper() + words[1:]


def convert(assignment: str, root: Path = ROOT, keep_all: bool = False) -> list[str]:
    """Writes ``<name>.py`` for each ``wrong_*``/``ok_*`` notebook of an assignment, then removes the
    notebook and its ``expected.json`` entry (the file goes when no entry is left). Returns what it did.

    Kept answers: those that differ from the solution and whose tests must lose points; when none
    must (an ``ok_`` alternative, or ``lost: "all"``) or ``keep_all``, every answer that differs. An
    answer that differs but whose tests keep full marks (a copy of an older solution) is dropped and
    said so.
    """
    folder = root / "tests" / "submissions" / assignment
    json_path = folder / EXPECTED_JSON
    described = json.loads(json_path.read_text()) if json_path.exists() else {}
    solution = solution_answers(assignment, root)
    answer_ids = list(solution)
    said: list[str] = []
    planned: list[tuple[Path, Path, str]] = []  # (notebook, .py, its text): written once all are good
    for path in sorted(p for p in folder.glob("*.ipynb") if p.name.startswith(ANSWER_PREFIXES)):
        name = path.stem
        if name not in described:
            raise SubmissionError(f"{path}: no entry in {json_path.name}; write its expectation there first")
        expected = described[name]
        nb = nbformat.read(path, as_version=4)
        answers = _cell_answers(nb, answer_ids)
        differ = [g for g in answer_ids if g in answers and answers[g].strip() != solution[g].strip()]
        if not differ:
            raise SubmissionError(
                f"{path}: no answer cell differs from the solution, so its mistake is outside the answers; "
                "an answer-only file cannot hold it (nothing was converted)"
            )
        lost = expected.get("lost", [])
        losing = {_tested_function(g, answer_ids) for g in lost} if isinstance(lost, list) else set()
        keep = differ if keep_all or not (losing & set(differ)) else [g for g in differ if g in losing]
        dropped = [g for g in differ if g not in keep]
        body = [f'"""{_humanize(name)}: {", ".join(keep)} differs from the reference solution.']
        body += ["", f"Converted from {path.name} by `python -m tests.submissions convert {assignment}`."]
        if dropped:
            body += [
                f"Dropped as copies of an older solution (their tests keep full marks): {', '.join(dropped)}."
            ]
        body += ['"""', "", "EXPECTED = " + pprint.pformat(expected, width=100, sort_dicts=False), ""]
        for g in keep:
            body += ["", answers[g].strip("\n"), ""]
        text = "\n".join(body).rstrip() + "\n"
        # What will be written must read back to the same expectation and answers.
        with tempfile.TemporaryDirectory() as scratch:
            probe = Path(scratch) / f"{name}.py"
            probe.write_text(text)
            try:
                _, back_expected, back = parse_answers(probe, answer_ids)
            except SubmissionError as e:
                raise SubmissionError(f"{path}: its answers do not fit an answer-only file: {e}") from None
        if back_expected != expected or {g: a.strip() for g, a in back.items()} != {
            g: answers[g].strip() for g in keep
        }:
            raise SubmissionError(f"{path}: its answers do not read back from an answer-only file as written")
        planned.append((path, path.with_suffix(".py"), text))
        said.append(f"{path.name} -> {name}.py: kept {keep}" + (f", dropped {dropped}" if dropped else ""))
    for path, target, text in planned:
        target.write_text(text)
        path.unlink()
        del described[path.stem]
    if json_path.exists():
        if set(described) - {"_about"}:
            json_path.write_text(json.dumps(described, indent=2, ensure_ascii=False) + "\n")
        else:
            json_path.unlink()
            said.append(f"{json_path.name}: no entry left, removed")
    return said
