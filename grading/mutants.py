"""Mutation testing of the graders: plausible wrong answers made from the reference solutions.

Run as ``python -m grading.mutants [--assignment 01_meshes] [--sample N] [--jobs J]`` (``make mutants``).

From each reference solution (``solutions/<a>/<a>.ipynb``) every answer cell is mutated, one plausible
learner mistake at a time (``grading/mutations.py`` makes them). One worker process per
assignment (8 CPU devices, as the notebooks' setup cell gives them) runs the solution's non-test
cells once; for each mutant it executes the mutated answer cell in a copy of that namespace, then the
graded test cells of that function (self-check and hidden tests). The mutant is killed when any of
them raises, or when it runs past the time limit. Mutants that do not compile, or that are the same
program as the solution or as an earlier mutant, are dropped.

Survivors are either killed by a stronger grader or listed, each with its reason, in
``grading/mutants_equivalent.toml`` under their fingerprint (which names the function, the kind of
mutation and the lines changed, not a position in the list). A function whose kill rate
``killed / (mutants - equivalent - unkillable)`` is under 95% fails the run; "unkillable" mutants are
wrong answers that no grader can catch on the CPU backend (the file's ``[unkillable_on_cpu]`` table),
counted and reported apart from the killed, the survivors and the equivalents. Reports:
``_build/mutants/<a>.md`` and ``.json``, and a summary table on stdout.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from grading.assignment import SETUP, Assignment, grade_id, is_answer, is_test, run_cell
from grading.mutations import (
    Mutant,
    Sites,
    hardcoding_mutants,
    hardcoding_sites,
    instrumented,
    mutants_of,
    solution_lines,
)

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EQUIVALENT_FILE = ROOT / "grading" / "mutants_equivalent.toml"
OUT_DIR = ROOT / "_build" / "mutants"
THRESHOLD = 0.95
TIMEOUT_S = 60

# The notebook ---------------------------------------------------------------------------------------


@dataclass
class Notebook:
    assignment: str
    base: list[tuple[str, str]]  # (grade_id, source) of the cells run once: imports and answers
    answers: dict[str, str]  # function -> answer cell source
    tests: dict[str, list[tuple[str, str]]]  # function -> [(grade_id, source)] of its graded cells
    axes: set[str]


def load(assignment: str) -> Notebook:
    notebook = Assignment.read(SOLUTIONS / assignment / f"{assignment}.ipynb")
    base, answers, graded = [], {}, []
    for cell in notebook.cells:
        gid = grade_id(cell) or cell.get("id", "")
        if cell.cell_type != "code" or gid == SETUP:
            continue  # the setup cell is the Colab install; the worker calls shardbook.setup() itself
        if is_test(cell):
            graded.append((gid, cell.source))
        else:
            base.append((gid, cell.source))
            if is_answer(cell):
                answers[gid] = cell.source
    tests = {
        fn: [
            (gid, src)
            for gid, src in graded
            if gid.startswith(f"test_{fn}_") or re.search(rf"\b{re.escape(fn)}\b", src)
        ]
        for fn in answers
    }
    axes = set()
    for _, src in graded + base:  # the mesh axis names the notebook uses
        for m in re.finditer(r"make_mesh\([^;]*?,\s*\(([^)]*)\)", src):
            axes.update(re.findall(r"[\"'](\w+)[\"']", m.group(1)))
    if len(axes) < 2:  # a one-axis notebook: the wrong name is the other axis the book uses
        axes |= {"X", "Y"}
    return Notebook(assignment, base, answers, tests, axes)


def all_mutants(nb: Notebook) -> list[Mutant]:
    return [m for fn, src in nb.answers.items() for m in mutants_of(nb.assignment, fn, src, nb.axes)]


def probed_source(source: str) -> str:
    """The answer cell with each hard-coding site wrapped in the probe (grading.parity records it)."""
    import ast

    sites = Sites(ast.parse(source), *solution_lines(source))
    return instrumented(source, hardcoding_sites(sites))


def hardcoding_of(nb: Notebook, function: str, found) -> list[Mutant]:
    """The hard-coding mutants of one answer from what its tests did (a grading.parity.Recording):
    every site whose value the tests vary, written as the self-check's first configuration has it,
    and each Mesh parameter replaced by the notebook's global mesh."""
    from jax.sharding import Mesh

    varied = {k for k, texts in found.taken.items() if len(texts) > 1}
    first = {k: v for k, v in found.first.items() if k in varied}
    return hardcoding_mutants(nb.assignment, function, nb.answers[function], first, found.meshes, Mesh)


def hardcoding(nb: Notebook, base: dict, functions: list[str] | None = None) -> list[Mutant]:
    """The hard-coding family (grading/mutations.py) of every answer (or of ``functions``): runs each
    function's self-check and hidden tests once on the probed solution (grading.parity)."""
    from grading import parity

    out = []
    for fn in nb.answers:
        if functions is None or fn in functions:
            found = parity.record_function(base, fn, nb.tests[fn], fresh, probed_source(nb.answers[fn]))
            out += hardcoding_of(nb, fn, found)
    return out


def first_hardcoding_judged(nb: Notebook, found: dict) -> dict[str, Mutant | None]:
    """Function -> its first hard-coding mutant (the earliest value read, or the mesh argument replaced
    by the global mesh) judged by the function's self-check alone, or None where no value it reads
    varies (parsing a text, say). ``found``: function -> what its tests did (grading.parity.Recording),
    from one run of the reference solution. `make mutants` judges them all, hidden tests included."""
    base = base_namespace(nb)
    visible_only = replace(
        nb, tests={fn: [(g, s) for g, s in cells if g.endswith("_visible")] for fn, cells in nb.tests.items()}
    )
    out: dict[str, Mutant | None] = {}
    for fn, rec in found.items():
        mutants = hardcoding_of(nb, fn, rec)
        out[fn] = judge(visible_only, base, mutants[0]) if mutants else None
    return out


def sample(mutants: list[Mutant], n: int | None) -> list[Mutant]:
    """``n`` mutants per function, spread evenly over its list (deterministic); all when n is None."""
    if n is None:
        return mutants
    out = []
    for fn in dict.fromkeys(m.function for m in mutants):
        mine = [m for m in mutants if m.function == fn]
        step = len(mine) / n if len(mine) > n else 1
        out += [mine[int(k * step)] for k in range(min(n, len(mine)))]
    return out


# The worker: one process per assignment --------------------------------------------------------------


class MutantTimeout(BaseException):
    """Raised by the alarm; a BaseException so that the graders' ``except Exception`` can't swallow it."""


def _alarm(signum, frame):
    raise MutantTimeout()


def run_cells(cells: list[tuple[str, str]], namespace: dict) -> tuple[str, str] | None:
    """Runs cells in order; the first (grade_id, message) that raised, or None if all passed."""
    for gid, src in cells:
        try:
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                run_cell(src, f"<{gid}>", namespace)  # as a kernel runs it (functions keep their source)
        except MutantTimeout:
            raise
        except BaseException as e:  # noqa: BLE001 (a mutant may raise anything, SystemExit included)
            first = (str(e).strip().splitlines() or [""])[0]
            return gid, f"{type(e).__name__}: {first}"[:300]
    return None


def worker(assignment: str, n: int | None, timeout: int, out: Path, only: list[str] | None = None) -> None:
    os.environ.setdefault("SHARDBOOK_DEVICES", "cpu")
    sys.path.insert(0, str(ROOT))
    import shardbook

    shardbook.setup(quiet=True)
    nb = load(assignment)
    base = base_namespace(nb)
    # The reference must pass, or every mutant would look killed: its test cells run once, probed, which
    # also gives the hard-coding family its values (RuntimeError if a cell fails).
    generated = all_mutants(nb) + hardcoding(nb, base)
    mutants = [m for m in sample(generated, n) if not only or m.fingerprint in only or m.kind in only]
    for k, m in enumerate(mutants, 1):
        judge(nb, base, m, timeout)
        print(
            f"[{assignment}] {k}/{len(mutants)} {m.status:8s} {m.seconds:6.2f}s {m.fingerprint}", flush=True
        )
    out.write_text(json.dumps([asdict(m) for m in mutants], indent=1))


def base_namespace(nb: Notebook) -> dict:
    """The namespace after the solution's imports and answer cells, run once per worker."""
    base: dict = {"__name__": "__main__"}
    failed = run_cells(nb.base, base)
    if failed:
        raise SystemExit(f"{nb.assignment}: the solution's cell {failed[0]} fails: {failed[1]}")
    base[RANDOM_STATES] = random_states(base)
    return base


RANDOM_STATES = "__mutants_random_states__"


def random_states(namespace: dict) -> list[tuple[object, object]]:
    """(generator, its state) for each NumPy Generator and random.Random the namespace holds."""
    import random

    import numpy as np

    out: list[tuple[object, object]] = []
    for value in namespace.values():
        if isinstance(value, np.random.Generator):
            out.append((value, copy.deepcopy(value.bit_generator.state)))
        elif isinstance(value, random.Random):
            out.append((value, value.getstate()))
    return out


def fresh(base: dict) -> dict:
    """A copy of ``base`` with every random generator back at its state after the solution's cells.

    The copy is shallow, so a generator is the same object in every mutant's namespace; without the
    reset each mutant would draw where the previous one stopped and verdicts would depend on run order.
    """
    for gen, state in base.get(RANDOM_STATES, []):
        if hasattr(gen, "bit_generator"):
            gen.bit_generator.state = copy.deepcopy(state)
        else:
            gen.setstate(state)
    return dict(base)


def judge(nb: Notebook, base: dict, m: Mutant, timeout: int = TIMEOUT_S) -> Mutant:
    """Runs the mutated answer cell and its function's graded cells in a copy of ``base``; sets m.status."""
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        failed = run_cells([(m.function, m.source), *nb.tests[m.function]], fresh(base))
        m.status, m.killed_by = ("killed", "{}: {}".format(*failed)) if failed else ("survived", "")
    except MutantTimeout:
        m.status, m.killed_by = "timeout", f"ran past {timeout} s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    m.seconds = round(time.perf_counter() - start, 2)
    return m


# The driver ------------------------------------------------------------------------------------------


UNKILLABLE_TABLE = "unkillable_on_cpu"


def equivalents(path: Path = EQUIVALENT_FILE) -> dict[str, dict[str, str]]:
    """assignment -> {fingerprint: reason}, the equivalent mutants."""
    if not path.exists():
        return {}
    tables = tomllib.loads(path.read_text())
    return {a: dict(v) for a, v in tables.items() if a != UNKILLABLE_TABLE}


def unkillables(path: Path = EQUIVALENT_FILE) -> dict[str, dict[str, str]]:
    """assignment -> {fingerprint: reason}: wrong answers no grader can catch on the CPU backend."""
    if not path.exists():
        return {}
    return {a: dict(v) for a, v in tomllib.loads(path.read_text()).get(UNKILLABLE_TABLE, {}).items()}


STATUSES = ("killed", "timeout", "survived", "equivalent", "unkillable")


def caught_only_by_hidden_tests(mutant: dict) -> bool:
    """A killed mutant whose self-check passed: the function's test cells run self-check first, so the
    cell that killed it (``killed_by`` begins with its grade_id) is a hidden test. A learner with that
    mistake reads "Self-check passed." and loses points later: each is a property the self-check
    should try (issue: self-check parity)."""
    return mutant["status"] == "killed" and mutant["killed_by"].split(":", 1)[0].endswith("_hidden")


def summarize(
    assignment: str, mutants: list[dict], known: dict[str, str], unkillable: dict[str, str] | None = None
) -> list[dict]:
    """One row per function: mutants, killed, timeout, survived, equivalent, unkillable, kill rate.

    The rate is (killed + timeout) / (mutants - equivalent - unkillable): an unkillable mutant is a
    wrong answer the CPU backend cannot show, so it is neither killed nor survived; it is counted and
    reported apart, with its reason.
    """
    unkillable = unkillable or {}
    rows = []
    for fn in dict.fromkeys(m["function"] for m in mutants):
        mine = [m for m in mutants if m["function"] == fn]
        for m in mine:
            if m["status"] == "survived" and m["fingerprint"] in known:
                m["status"], m["killed_by"] = "equivalent", known[m["fingerprint"]]
            elif m["status"] == "survived" and m["fingerprint"] in unkillable:
                m["status"], m["killed_by"] = "unkillable", unkillable[m["fingerprint"]]
        count = {s: sum(m["status"] == s for m in mine) for s in STATUSES}
        judged = len(mine) - count["equivalent"] - count["unkillable"]
        rate = (count["killed"] + count["timeout"]) / judged if judged else 1.0
        hidden_only = sum(caught_only_by_hidden_tests(m) for m in mine)
        rows.append(
            {
                "assignment": assignment,
                "function": fn,
                "mutants": len(mine),
                **count,
                "hidden_only": hidden_only,
                "rate": rate,
            }
        )
    return rows


def write_report(assignment: str, mutants: list[dict], rows: list[dict], seconds: float) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"{assignment}.json").write_text(json.dumps({"rows": rows, "mutants": mutants}, indent=1))
    lines = [f"# Mutants of {assignment}", "", f"Run time {seconds:.0f} s.", ""]
    lines += [
        "| function | mutants | killed | caught only by hidden tests | timeout | equivalent "
        "| unkillable on CPU | survived | kill rate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['function']} | {r['mutants']} | {r['killed']} | {r['hidden_only']} | {r['timeout']} "
            f"| {r['equivalent']} | {r['unkillable']} | {r['survived']} | {r['rate']:.1%} |"
        )
    titles = {
        "survived": "Survived",
        "hidden_only": "Caught only by hidden tests (the self-check passed them)",
        "equivalent": "Equivalent",
        "unkillable": "Unkillable on CPU",
    }
    for status, title in titles.items():
        if status == "hidden_only":
            chosen = [m for m in mutants if caught_only_by_hidden_tests(m)]
        else:
            chosen = [m for m in mutants if m["status"] == status]
        if chosen:
            lines += ["", f"## {title}", ""]
            for m in chosen:
                note = f" — {m['killed_by']}" if status != "survived" else ""
                lines += [f"### {m['fingerprint']}{note}", "", "```diff", m["diff"].rstrip(), "```", ""]
    (OUT_DIR / f"{assignment}.md").write_text("\n".join(lines) + "\n")


def run_assignment(
    assignment: str, n: int | None, timeout: int, only: list[str] | None = None
) -> tuple[list[dict], list[dict], float]:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    stem = f"{assignment}.only" if only else assignment  # a run of chosen mutants keeps the full report
    raw = OUT_DIR / f"{stem}.raw.json"
    raw.unlink(missing_ok=True)
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "grading.mutants", "--worker", assignment, "--timeout", str(timeout)]
    cmd += ["--raw", str(raw)] + (["--sample", str(n)] if n is not None else [])
    cmd += [arg for fp in only or [] for arg in ("--only", fp)]
    env = {**os.environ, "SHARDBOOK_DEVICES": "cpu", "PYTHONPATH": str(ROOT)}
    log = OUT_DIR / f"{stem}.log"
    with log.open("w") as f:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if proc.returncode or not raw.exists():
        tail = log.read_text()[-2000:]
        raise RuntimeError(f"{assignment}: the mutant worker failed (exit {proc.returncode}); {log}:\n{tail}")
    mutants = json.loads(raw.read_text())
    rows = summarize(
        assignment, mutants, equivalents().get(assignment, {}), unkillables().get(assignment, {})
    )
    if not only:
        write_report(assignment, mutants, rows, seconds)
    return rows, mutants, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", action="append", help="one assignment (repeatable); default all")
    parser.add_argument("--sample", type=int, help="at most N mutants per function, spread evenly")
    parser.add_argument("--jobs", type=int, default=1, help="assignments run in parallel")
    parser.add_argument(
        "--timeout", type=int, default=TIMEOUT_S, help="seconds per mutant (counts as killed)"
    )
    parser.add_argument("--list", action="store_true", help="list the mutants (id, diff) and run nothing")
    parser.add_argument(
        "--only", action="append", help="run only the mutants with this fingerprint or kind (repeatable)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--raw", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.sample, args.timeout, args.raw, args.only)
        return 0
    assignments = args.assignment or sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir())
    if args.list:  # the hard-coding family runs each self-check once to read its first configuration
        os.environ.setdefault("SHARDBOOK_DEVICES", "cpu")
        import shardbook

        shardbook.setup(quiet=True)
        for a in assignments:
            nb = load(a)
            for m in sample(all_mutants(nb) + hardcoding(nb, base_namespace(nb)), args.sample):
                print(f"== {a} {m.fingerprint}\n{m.diff}")
        return 0
    start = time.perf_counter()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(
            pool.map(lambda a: run_assignment(a, args.sample, args.timeout, args.only), assignments)
        )
    rows = [r for result in results for r in result[0]]
    print(
        f"\n{'function':<40} {'mutants':>7} {'killed':>6} {'hidden':>6} {'t/o':>4} {'equiv':>5} "
        f"{'cpu':>4} {'surv':>4} {'rate':>7}"
    )
    for r in rows:
        name = f"{r['assignment']}:{r['function']}"
        print(
            f"{name:<40} {r['mutants']:>7} {r['killed']:>6} {r['hidden_only']:>6} {r['timeout']:>4} "
            f"{r['equivalent']:>5} {r['unkillable']:>4} {r['survived']:>4} {r['rate']:>7.1%}"
        )
    print("(hidden: killed by a hidden test after the self-check passed it)")
    for a, (_, _, seconds) in zip(assignments, results, strict=True):
        print(f"{a}: {seconds:.0f} s")
    print(f"total {time.perf_counter() - start:.0f} s; reports in {OUT_DIR.relative_to(ROOT)}/")
    low = [r for r in rows if r["rate"] < THRESHOLD]
    for r in low:
        print(
            f"FAIL {r['assignment']}:{r['function']} kills {r['rate']:.1%} < {THRESHOLD:.0%}", file=sys.stderr
        )
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
