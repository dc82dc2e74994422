"""The learner's path, end to end: a Colab-like runtime, the setup cell, a solved assignment, grading.

    python tools/learner_path.py [--runtime latest 26.07] [--assignment 01_meshes 11_training]
                                 [--preinstalled-jax newest] [--summary FILE] [--keep]

Colab's runtimes are read from tools/colab_runtimes.toml (their Python and preinstalled packages, with
the date and source they were read from); `make learner-path` walks each of them. For each, as a
Colab learner would, on this machine and with nothing but PyPI:
  1. builds (once per machine, cached in the user's cache folder and keyed on its requirements and
     Python version: $SHARDBOOK_CACHE, else $XDG_CACHE_HOME/shardbook or ~/.cache/shardbook, so a
     fresh clone reuses it) a virtual environment that stands in for a fresh Colab runtime: that
     runtime's Python with its JAX, NumPy, SciPy, flax, optax and orbax-checkpoint preinstalled, plus
     Matplotlib, Rich and IPython's kernel (the Python is found by its version: `python3.13` on the
     PATH, or pyenv's installation of it);
  2. copies it, so each run starts from that fresh state, and serves the working tree as a git
     repository in a scratch folder, the stand-in for the book's GitHub URL (the setup cell reads
     $SHARDBOOK_URL instead of its default);
  3. runs the first assignment's setup cell in a kernel of that copy, with NumPy imported first as
     on Colab: it must install the pinned JAX (and the flax, optax and orbax-checkpoint the book is
     executed with, in place of Colab's) and ask for a restart in the words Colab uses;
  4. "restarts" (a new kernel) and runs the whole notebook with the instructor's answers filled in;
     checks the setup cell's messages and the versions now loaded; runs the imports cell before the
     setup cell in one more kernel;
  5. saves the notebook the way Colab downloads it (no cell metadata, a top-level `colab` block,
     nbformat 4.0, outputs kept) and grades it with `python -m grading.grade` in a scratch course,
     which must give full marks with nothing to report (on the first runtime only: the download's
     shape does not depend on the runtime, and grading runs in the book's own environment);
  6. on the first runtime, for each further assignment (as a learner's next notebook): the whole
     notebook with its answers, and one committed wrong answer whose self-check must print, word for
     word, the lines in WRONG_ANSWERS (its download is not graded: 5 proved the shape, and
     tests/test_submissions.py grades its answers). The other runtimes walk the first assignment's
     fresh session and restart only (3 and the first part of 4): what differs between runtimes is what
     the setup cell replaces.
It prints each step's time and every message the setup cell showed. Exit status 0 means the path works.
`--preinstalled-jax newest` puts the newest JAX on PyPI in the runtime in place of Colab's (the weekly
canary: Colab's next runtime), and `--summary FILE` appends a Markdown account of what was walked and
what broke (the canary's job summary).

Notebooks as a learner hands them in (solved, with helper cells, as Colab downloads them) are built by
tools/handed_in.py, which the grading tests and tests/submissions use too.
"""

from __future__ import annotations

import argparse
import copy
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.assignment import IMPORTS, Assignment, grade_id  # noqa: E402
from shardbook.setup import COMPANIONS, PINNED_JAX, RESTART_COLAB  # noqa: E402  (the standard library only)
from tools.handed_in import (  # noqa: E402
    solved_notebook,
    write_colab_download,
)

#: Colab's runtimes: their Python and preinstalled packages, and when and where they were read.
RUNTIMES_FILE = ROOT / "tools" / "colab_runtimes.toml"
#: What every stand-in has besides the runtime's own packages: Matplotlib and Rich (which Colab has),
#: packaging, and the kernel.
ALWAYS = ["matplotlib", "rich", "packaging", "ipykernel"]


@dataclass(frozen=True)
class Runtime:
    """One Colab runtime as tools/colab_runtimes.toml writes it."""

    name: str
    label: str
    python: str  # "3.13"
    packages: tuple[str, ...]  # "jax==0.7.2", ...

    def requirements(self, preinstalled_jax: str | None = None) -> list[str]:
        """What its stand-in has installed before the setup cell runs. ``preinstalled_jax``: a JAX
        version in place of Colab's ("newest": the newest on PyPI for this Python)."""
        packages = list(self.packages)
        if preinstalled_jax:
            pin = "" if preinstalled_jax == "newest" else f"=={preinstalled_jax}"
            packages = [p for p in packages if _name(p) not in ("jax", "jaxlib")]
            packages[:0] = [f"jax{pin}", f"jaxlib{pin}"]
        return [*packages, *ALWAYS]


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~\[; ]", requirement, maxsplit=1)[0].lower()


def load_runtimes(path: Path = RUNTIMES_FILE) -> tuple[list[Runtime], dict[str, str]]:
    """The runtimes of tools/colab_runtimes.toml, the default first, and its [read] table (on, from)."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    runtimes = [Runtime(r["name"], r["label"], r["python"], tuple(r["packages"])) for r in data["runtime"]]
    return runtimes, dict(data["read"])


#: The assignments `make learner-path` walks: the first from a fresh runtime, the next as a learner's
#: next notebook in the same runtime (one that imports flax and optax, so Colab's copies matter).
ASSIGNMENTS = ["01_meshes", "11_training"]
#: For an assignment after the first: a committed wrong answer (tests/submissions) handed to one
#: answer cell, and every line its self-check shows the learner, word for word (shardbook.errors' short
#: form: the check's sentence, the learner's own cell lines, no helper-package traceback).
WRONG_ANSWERS: dict[str, tuple[str, str, list[str]]] = {
    "11_training": (
        "wrong_largest_dim",
        "fsdp_shardings",
        [
            "CheckFailed: fsdp_shardings for a leaf of shape (16, 32): expected NamedSharding(mesh, "
            "P('data', None)), got NamedSharding(mesh, P(None, 'data')). Hint: the leading dimension, 16, "
            "divides by 8, so it is the one sharded, even where a later dimension is larger.",
            "  Cell In[5], line 64: raise CheckFailed(",
        ],
    ),
}
#: What Colab has imported before a learner's first cell runs (its "previously imported" warnings).
PRELOADED = "import numpy"


# ---------------------------------------------------------------------------------------------------
# The path itself


def _say(message: str) -> None:
    print(f"learner-path: {message}", flush=True)


def runtime_cache() -> Path:
    """Where the Colab-like runtimes are kept: outside the checkout, so that a fresh clone (CI) does not
    build again what this machine built before."""
    if os.environ.get("SHARDBOOK_CACHE"):
        return Path(os.environ["SHARDBOOK_CACHE"]) / "learner-path"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "shardbook" / "learner-path"


def find_python(minor: str, given: dict[str, str] | None = None) -> str:
    """A Python of version ``minor`` ("3.13") on this machine, as the path of its executable.

    ``python3.13`` on the PATH first; where that is pyenv's shim for a version not selected, each of
    pyenv's installations of that version is asked by name (PYENV_VERSION), as the Makefile does.
    """
    if given and minor in given:
        return given[minor]
    ask = "import sys; print(sys.executable); print('%d.%d' % sys.version_info[:2])"
    tries: list[dict[str, str]] = [{}]
    if shutil.which("pyenv"):
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout
        tries += [{"PYENV_VERSION": v} for v in versions.split() if v == minor or v.startswith(minor + ".")]
    for extra in tries:
        try:
            answer = subprocess.run(
                [f"python{minor}", "-c", ask],
                capture_output=True,
                text=True,
                env=dict(os.environ, **extra),
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        lines = answer.stdout.split()
        if answer.returncode == 0 and len(lines) == 2 and lines[1] == minor:
            return lines[0]
    raise PathFailed(
        f"no Python {minor} on this machine (Colab's runtime needs it): install it (pyenv install "
        f"{minor}, apt-get install python{minor}, actions/setup-python) or pass --python {minor}=PATH"
    )


def python_version(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def runtime_key(version: str, requirements: list[str]) -> str:
    return hashlib.sha256("\n".join([version, *requirements]).encode()).hexdigest()[:12]


def runtime_venv(
    python: str, requirements: list[str], cache: Path, keep: set[str] | frozenset[str] = frozenset()
) -> tuple[Path, float, bool]:
    """The cached stand-in for a fresh Colab runtime, built once per requirements and Python version.

    Stand-ins whose key is neither this one nor in ``keep`` (another runtime walked in the same run)
    are removed: 0.8 GB each. Returns (its folder, seconds spent, whether it was built now).
    """
    version = python_version(python)
    key = runtime_key(version, requirements)
    folder = cache / f"runtime-{key}"
    start = time.monotonic()
    if (folder / "ready").exists():
        return folder, time.monotonic() - start, False
    for stale in [*cache.glob("runtime-*"), *cache.glob("building-*")]:
        if stale.name.split("-", 1)[1] not in keep | {key} or stale.name.startswith("building-"):
            shutil.rmtree(stale, ignore_errors=True)
    building = cache / f"building-{key}"
    cache.mkdir(parents=True, exist_ok=True)
    _say(f"building the Colab-like runtime (Python {version}; {' '.join(requirements)})…")
    subprocess.run([python, "-m", "venv", str(building)], check=True)
    # --no-compile: no bytecode for the 0.8 GB installed, only for the modules a run imports (measured
    # 2026-12-03: the install 30 -> 16 s of CPU; a fresh copy's first import of the stack +2.7 s).
    pip = [str(building / "bin" / "python"), "-m", "pip", "install", "-qq", "--no-compile"]
    subprocess.run([*pip, *requirements], check=True)
    (building / "requirements.txt").write_text("\n".join(requirements) + "\n")
    (building / "ready").write_text(version + "\n")
    building.rename(folder)
    return folder, time.monotonic() - start, True


def installed_in(venv: Path, names: tuple[str, ...]) -> str:
    """'name==version ...' of distributions installed in a runtime (what it preinstalled)."""
    code = (
        "import importlib.metadata as m\n"
        f"print(' '.join(f'{{n}}=={{m.version(n)}}' for n in {list(names)!r}))"
    )
    python = str(venv / "bin" / "python")
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def stand_in_repository(into: Path) -> str:
    """The working tree as a git repository in ``into``: what the setup cell installs from."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    git = ["git", "-c", "user.name=learner-path", "-c", "user.email=learner-path@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=into, check=True)
    subprocess.run([*git, "add", "-A"], cwd=into, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the working tree"], cwd=into, check=True)
    return f"git+file://{into}"


def _kernel(run: Path, install_url: str) -> str:
    """A Jupyter kernel spec for the runtime copy; returns its name (found through $JUPYTER_PATH)."""
    spec = run / "jupyter" / "kernels" / "colab-like"
    spec.mkdir(parents=True, exist_ok=True)
    python = str(run / "venv" / "bin" / "python")
    env = {"COLAB_RELEASE_TAG": "learner-path", "SHARDBOOK_URL": install_url}
    argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Colab-like", "language": "python", "env": env})
    )
    os.environ["JUPYTER_PATH"] = str(run / "jupyter")
    return "colab-like"


def _text(cell) -> str:
    """What a learner sees under a cell: its printed text and error lines."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") == "error":
            parts.append("\n".join(output.get("traceback", [])) + "\n")
        else:
            parts.append(output.get("data", {}).get("text/plain", "") + "\n")
    return re.sub(r"\x1b\[[0-9;]*m", "", "".join(parts))


def _seconds(cell) -> float:
    timing = cell.get("metadata", {}).get("execution", {})
    try:
        from datetime import datetime

        begin = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
        return (end - begin).total_seconds()
    except (KeyError, ValueError):
        return float("nan")


def execute(cells: list, kernel: str, cwd: Path, allow_errors: bool) -> nbformat.NotebookNode:
    """Runs cells in a fresh kernel (a fresh Colab session), NumPy imported first as Colab does."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PRELOADED), *copy.deepcopy(cells)])
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    client = NotebookClient(
        nb,
        kernel_name=kernel,
        timeout=1200,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    nb.cells = nb.cells[1:]
    return nb


class PathFailed(Exception):
    pass


def check(condition: bool, what: str, seen: str = "") -> None:
    if not condition:
        raise PathFailed(what + (f"\n--- it showed:\n{seen}" if seen else ""))


def grade_download(notebook: nbformat.NotebookNode, assignment: str, run: Path) -> tuple[str, float]:
    """Saves ``notebook`` as Colab downloads it and grades it as an instructor does, in a scratch course:
    it must get full marks with nothing to report. Returns (the report, seconds)."""
    from grading.worker import copy_course

    t = time.monotonic()
    downloads = run / f"downloads-{assignment}"
    downloads.mkdir()
    write_colab_download(notebook, downloads / "colab_learner.ipynb", with_outputs=False)
    course = copy_course(run / f"scratch-{assignment}")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHARDBOOK_DEVICES="cpu")
    env.pop("JUPYTER_PATH")
    graded = subprocess.run(
        [sys.executable, "-m", "grading.grade", assignment, str(downloads), "--root", str(course)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    check(graded.returncode == 0, f"grading {assignment} failed", graded.stdout + graded.stderr)
    reports = course / "grading" / "reports" / assignment
    check(
        (reports / "scores.csv").is_file(),
        f"grading {assignment} wrote no scores.csv",
        graded.stdout + graded.stderr,
    )
    with open(reports / "scores.csv") as f:
        row = next(csv.DictReader(f))
    report = (reports / "report.txt").read_text()
    check(
        float(row["total"]) == float(row["max"]) > 0, f"not full marks: {row['total']}/{row['max']}", report
    )
    check(report.count("\n") == 1, "the report has notes for a plain Colab download", report)
    return report, time.monotonic() - t


#: A cell that prints the versions the learner's session has loaded.
VERSIONS_CELL = (
    "import importlib.metadata as _m\n"
    "print(' '.join(f'{p}=={_m.version(p)}' for p in ('jax', 'flax', 'optax', 'orbax-checkpoint')))\n"
)


def first_walk(
    assignment: str, kernel: str, run: Path, times: list, messages: list, grade: bool = True
) -> None:
    """A fresh runtime: the setup cell installs and asks for a restart; after it the whole notebook
    runs with its answers on the book's versions; then (unless ``grade`` is False: a runtime after the
    first) the imports cell may come first and the download grades."""
    solved = solved_notebook(assignment)
    setup_cell = next(c for c in solved.cells if c.cell_type == "code")
    imports_cell = Assignment(solved).cell(IMPORTS)

    # 1. A fresh runtime: the setup cell installs, then asks for a restart; a learner who goes on
    #    anyway is stopped at the imports cell by the same sentence.
    _say(f"{assignment}, session 1: a fresh runtime runs the setup cell, then the imports cell…")
    first = execute([setup_cell, imports_cell], kernel, run, allow_errors=True)
    shown = _text(first.cells[0])
    times.append(
        ("setup cell on a fresh runtime (installs JAX " + PINNED_JAX + ")", _seconds(first.cells[0]))
    )
    messages += [
        ("setup cell, fresh runtime", shown),
        ("imports cell, before restarting", _text(first.cells[1])),
    ]
    check(
        f"installing JAX {PINNED_JAX} and the book's helper, about a minute…" in shown,
        "no progress line",
        shown,
    )
    check("shardbook: pip is installing" in shown and " done in " in shown, "no pip progress", shown)
    check(
        shown.rstrip().endswith(RESTART_COLAB + "."), "the setup cell must end with the restart advice", shown
    )
    check("resolver" not in shown and "Traceback" not in shown, "pip noise or a traceback", shown)
    check(
        RESTART_COLAB in _text(first.cells[1]),
        "the imports cell must repeat the advice",
        _text(first.cells[1]),
    )

    # 2. After the restart: the whole notebook, answered, top to bottom, on the book's versions.
    _say(f"{assignment}, session 2: after the restart, the whole notebook with its answers…")
    t = time.monotonic()
    second = execute(
        [*solved.cells, nbformat.v4.new_code_cell(VERSIONS_CELL)], kernel, run, allow_errors=False
    )
    versions = _text(second.cells.pop())
    times.append((f"{assignment} top to bottom after the restart", time.monotonic() - t))
    setup_again = next(c for c in second.cells if c.cell_type == "code")
    times.append(("setup cell after the restart", _seconds(setup_again)))
    shown = _text(setup_again)
    messages += [("setup cell, after the restart", shown), ("versions loaded after the restart", versions)]
    check(
        re.fullmatch(
            r"shardbook: 8 simulated CPU devices · backend cpu · JAX " + re.escape(PINNED_JAX) + r"\n", shown
        )
        is not None,
        "after the restart the setup cell prints one line",
        shown,
    )
    book = [f"jax=={PINNED_JAX}", *(f"{p}=={v}" for p, v in COMPANIONS.items())]
    check(versions.split() == book, f"Colab's flax, optax and orbax were not replaced by {book}", versions)

    # 3. Another session in which the imports cell runs before the setup cell (on the first runtime:
    #    what it checks does not depend on the runtime).
    if not grade:
        return
    _say(f"{assignment}, session 3: the imports cell before the setup cell…")
    third = execute([imports_cell, setup_cell], kernel, run, allow_errors=False)
    shown = _text(third.cells[1])
    messages.append(("setup cell after the imports cell, pin installed", shown))
    check(shown.startswith("shardbook: 8 simulated CPU devices"), "imports first must still work", shown)

    # 4. Downloaded as Colab saves it, graded as an instructor does.
    if not grade:
        return
    _say(f"{assignment}: grading the Colab-shaped download…")
    report, seconds = grade_download(second, assignment, run)
    times.append((f"python -m grading.grade {assignment} in a scratch course", seconds))
    messages.append((f"report.txt of {assignment}", report))


def next_walk(assignment: str, kernel: str, run: Path, times: list, messages: list) -> None:
    """A learner's next notebook in the same runtime: the whole notebook with its answers and one wrong
    answer's self-check, word for word."""
    from tests import submissions

    solved = solved_notebook(assignment)
    _say(f"{assignment}: the whole notebook with its answers, then a wrong answer's self-check…")
    t = time.monotonic()
    execute(solved.cells, kernel, run, allow_errors=False)
    times.append((f"{assignment} top to bottom", time.monotonic() - t))
    name, answer, expected = WRONG_ANSWERS[assignment]
    wrong = submissions.notebook(submissions.answer_only(assignment)[name], assignment)
    # A fresh session of the wrong notebook, from its top to the answer's self-check (hidden tests are
    # not in a learner's notebook).
    ids = [grade_id(c) for c in wrong.cells]
    upto = [c for c in wrong.cells[: ids.index(f"test_{answer}_visible") + 1] if c.cell_type == "code"]
    t = time.monotonic()
    tried = execute(upto, kernel, run, allow_errors=True)
    times.append((f"{assignment}: {name} and its self-check", time.monotonic() - t))
    shown = _text(tried.cells[-1])
    messages.append((f"self-check of {answer} after {name}", shown))
    check(shown.splitlines() == expected, f"{name}: the self-check must show exactly {expected}", shown)
    # Its download is not graded: the first assignment's download proves the Colab shape grades, and
    # tests/test_submissions.py grades this assignment's answers.


def walk(
    runtime: Runtime,
    python: str,
    requirements: list[str],
    assignments: list[str],
    cache: Path,
    keep: set[str],
    grade: bool,
    times: list,
    messages: list,
) -> None:
    """One runtime's walk: its stand-in (cached), a fresh copy, the first assignment from a fresh
    session, then the others as a learner's next notebooks."""
    run = ROOT / "_build" / "learner-path" / runtime.name
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    base, seconds, built = runtime_venv(python, requirements, cache, keep)
    times.append((f"[{runtime.name}] runtime " + ("built" if built else "from the cache"), seconds))
    t = time.monotonic()
    shutil.copytree(base, run / "venv", symlinks=True)
    (run / "repository").mkdir()
    url = stand_in_repository(run / "repository")
    kernel = _kernel(run, url)
    times.append(
        (f"[{runtime.name}] fresh copy of the runtime and the stand-in repository", time.monotonic() - t)
    )
    mark = len(times)
    first_walk(assignments[0], kernel, run, times, messages, grade=grade)
    for assignment in assignments[1:]:
        next_walk(assignment, kernel, run, times, messages)
    times[mark:] = [(f"[{runtime.name}] {label}", seconds) for label, seconds in times[mark:]]


def main(argv: list[str] | None = None) -> int:
    runtimes, read = load_runtimes()
    by_name = {r.name: r for r in runtimes}
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--runtime",
        nargs="+",
        choices=list(by_name),
        default=list(by_name),
        help="Colab's runtimes to walk, from tools/colab_runtimes.toml (default: all, %(default)s)",
    )
    parser.add_argument(
        "--assignment",
        nargs="+",
        default=ASSIGNMENTS,
        help="on the first runtime: the first from a fresh runtime, the others after it; the other "
        "runtimes walk the first only (default: %(default)s)",
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="VERSION=PATH",
        help="the Python for runtimes of that version, e.g. 3.13=/usr/bin/python3.13 (default: found)",
    )
    parser.add_argument(
        "--preinstalled-jax",
        metavar="VERSION",
        help="this JAX in the runtime in place of Colab's; 'newest': the newest on PyPI (the canary)",
    )
    parser.add_argument("--summary", type=Path, help="append a Markdown account of the walk to this file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders")
    args = parser.parse_args(argv)
    unknown = [a for a in args.assignment[1:] if a not in WRONG_ANSWERS]
    if unknown:
        parser.error(f"no wrong answer chosen for {unknown} in WRONG_ANSWERS")
    given = dict(item.split("=", 1) for item in args.python)

    os.environ.pop("PYTHONPATH", None)  # the runtime must not see this checkout: it installs the helper
    os.environ.pop("SHARDBOOK_DEVICES", None)
    cache = runtime_cache()
    chosen = [by_name[name] for name in args.runtime]
    times: list[tuple[str, float]] = []
    messages: list[tuple[str, str]] = []
    outcome: list[tuple[Runtime, str, str]] = []  # (runtime, what it had, "ok" or what broke)
    started = time.monotonic()
    try:
        pythons = {r.python: find_python(r.python, given) for r in chosen}
        wants = {r.name: r.requirements(args.preinstalled_jax) for r in chosen}
        keep = {runtime_key(python_version(pythons[r.python]), wants[r.name]) for r in chosen}
        for i, runtime in enumerate(chosen):
            _say(f"{runtime.label}: {' '.join(wants[runtime.name])}")
            assignments = args.assignment if i == 0 else args.assignment[:1]
            try:
                walk(
                    runtime,
                    pythons[runtime.python],
                    wants[runtime.name],
                    assignments,
                    cache,
                    keep,
                    i == 0,
                    times,
                    messages,
                )
            except (PathFailed, subprocess.CalledProcessError) as failure:
                outcome.append((runtime, _had(runtime, cache, wants), _broke(failure)))
                _say(f"FAILED on {runtime.label}: {failure}")
            else:
                outcome.append((runtime, _had(runtime, cache, wants), "ok"))
    except PathFailed as failure:
        _say(f"FAILED: {failure}")
        return 1
    finally:
        for label, text in messages:
            print(f"--- {label}:\n{text.rstrip()}")
        for label, seconds in times:
            print(f"{seconds:8.1f} s  {label}")
        print(f"{time.monotonic() - started:8.1f} s  in all")
        if not args.keep:
            for runtime in chosen:
                shutil.rmtree(ROOT / "_build" / "learner-path" / runtime.name, ignore_errors=True)
        if args.summary:
            write_summary(args.summary, outcome, read, args.assignment)
    failed = [r.name for r, _, result in outcome if result != "ok"]
    if failed:
        _say(f"FAILED on {', '.join(failed)}: the messages above say what broke")
        return 1
    walked = " then ".join(args.assignment)
    names = ", ".join(r.name for r in chosen)
    _say(f"ok: {walked} solved on Colab-like runtimes ({names}), downloaded as Colab does, full marks")
    return 0


def _had(runtime: Runtime, cache: Path, wants: dict[str, list[str]]) -> str:
    """The JAX, NumPy and companions the runtime's stand-in had preinstalled (read from it)."""
    for folder in cache.glob("runtime-*"):
        if (folder / "requirements.txt").is_file() and (
            (folder / "requirements.txt").read_text().split() == wants[runtime.name]
        ):
            return installed_in(folder, ("jax", "jaxlib", "numpy", "flax", "optax", "orbax-checkpoint"))
    return " ".join(wants[runtime.name])


def _broke(failure: BaseException) -> str:
    if isinstance(failure, subprocess.CalledProcessError):
        return f"{' '.join(map(str, failure.cmd))[:200]} exited with {failure.returncode}"
    return str(failure)


def write_summary(path: Path, outcome: list, read: dict[str, str], assignments: list[str]) -> None:
    """Appends the walk's account in Markdown: each runtime, what it had, and what broke."""
    lines = [
        "## The learner's path on Colab-like runtimes",
        "",
        f"Runtimes as read on {read.get('on')} ({read.get('from')}), tools/colab_runtimes.toml; "
        f"assignments {', '.join(assignments)} on the first, {assignments[0]} on the others.",
        "",
        "| runtime | preinstalled | result |",
        "| --- | --- | --- |",
    ]
    for runtime, had, result in outcome:
        first = result.splitlines()[0] if result.strip() else result
        lines.append(f"| {runtime.label} | {had} | {'✅ ok' if result == 'ok' else '❌ ' + first} |")
    for runtime, _, result in outcome:
        if result != "ok":
            lines += ["", f"### What broke on {runtime.label}", "", "```", result.strip()[:6000], "```"]
    with open(path, "a") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
