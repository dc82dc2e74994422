"""No test asserts on wall-clock time: `make test` must pass on a machine busy with other work.

A test that says "this took less than a second" fails the day the two cores are shared (it did: an
analysis bounded by one second took 1.30 s on a loaded CI machine). The scan reads every test's source (ast)
and finds an assertion that compares

* a clock reading: a call of ``time.time``, ``time.monotonic``, ``time.perf_counter`` (and their
  ``_ns`` forms) or ``datetime.now``, or a name assigned from an expression holding one
  (``start = time.monotonic()``, later compared with a bound after ``time.monotonic() - start``);
* a name or attribute that says time (``seconds``, ``elapsed``, ``duration``, ``took``, ``wall``,
  ``runtime``, ``perf_counter``) against a bare number other than 0 (a report's seconds bounded by one).

A modelled time compared with another modelled time (``ring.seconds < plain.seconds``, the cost model's
estimates) is not the clock and is allowed; so is any time printed, recorded, compared for equality or
with 0 (it was measured at all). A process's CPU time (``time.process_time``) is not the wall clock: a
busy machine stretches the wall time of a test, not the CPU it spends (a bound on it stays allowed).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = {"time", "monotonic", "perf_counter", "now", "utcnow"}
CLOCKS |= {f"{c}_ns" for c in CLOCKS}
TIME_WORDS = re.compile(r"seconds|elapsed|duration|took|wall|runtime|perf_counter", re.IGNORECASE)
ORDERINGS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in CLOCKS:
        base = func.value
        return (
            isinstance(base, ast.Name)
            and base.id in ("time", "datetime")
            or (isinstance(base, ast.Attribute) and base.attr == "datetime")
        )
    return isinstance(func, ast.Name) and func.id in CLOCKS - {"time", "now"}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _clock_names(tree: ast.AST) -> set[str]:
    """Names assigned (anywhere in the module) from an expression that reads a clock, transitively."""
    tainted: set[str] = set()
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            if node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                pairs = [(target, node.value)]
                if (  # a, b = x, y: each name from its own value
                    isinstance(target, ast.Tuple)
                    and isinstance(node.value, ast.Tuple)
                    and len(target.elts) == len(node.value.elts)
                ):
                    pairs = list(zip(target.elts, node.value.elts, strict=True))
                for name_node, value in pairs:
                    if any(_is_clock_call(n) for n in ast.walk(value)) or _names(value) & tainted:
                        for name in _names(name_node) - tainted:
                            tainted.add(name)
                            changed = True
    return tainted


def _says_time(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and TIME_WORDS.search(n.id):
            return True
        if isinstance(n, ast.Attribute) and TIME_WORDS.search(n.attr):
            return True
    return False


def _is_bound(node: ast.AST) -> bool:
    """A bare number other than 0 (a bound on a time; ``> 0`` only says it was measured)."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
        and node.value != 0
    )


def clock_assertions(source: str, filename: str = "<test>") -> list[str]:
    """'file:line: the assertion' for each assertion of ``source`` that compares a wall-clock time."""
    tree = ast.parse(source, filename)
    tainted = _clock_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            if not any(isinstance(op, ORDERINGS) for op in compare.ops):
                continue
            sides = [compare.left, *compare.comparators]
            clock = any(_is_clock_call(n) for side in sides for n in ast.walk(side)) or any(
                _names(side) & tainted for side in sides
            )
            timed_against_number = any(_says_time(s) for s in sides) and any(_is_bound(s) for s in sides)
            if clock or timed_against_number:
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
                break
    return found


def test_no_test_asserts_on_wall_clock_time():
    # Property: no assertion in tests/ compares a clock reading or a measured duration with a bound.
    found = [
        hit
        for path in sorted(TESTS.rglob("*.py"))
        if "__pycache__" not in path.parts
        for hit in clock_assertions(path.read_text(), str(path.relative_to(TESTS.parent)))
    ]
    assert found == [], "assertions on wall-clock time (they fail on a busy machine):\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_timed_assertion():
    # Property: the scan is not blind: each way of timing a test is found, modelled times are not.
    # Each timed sample spells its assertion with A, never in one piece, so that a text search of the
    # tests for timed assertions finds none of these samples (it found one written out, 2026-12-07).
    A = "assert"
    timed = {
        f"{A} report.seconds < 1.0": 1,
        f"import time\nstart = time.monotonic()\nf()\n{A} time.monotonic() - start > 6": 1,
        f"import time\nt0 = time.perf_counter()\nf()\nspent = time.perf_counter() - t0\n{A} spent <= 2": 1,
        f"from time import perf_counter\nt = perf_counter()\n{A} perf_counter() - t < 3": 1,
        f"{A} elapsed < 5 and ok": 1,
        f"{A} 0.5 >= run.duration_s": 1,
        f"import datetime\nt = datetime.datetime.now()\n{A} (datetime.datetime.now() - t).seconds < 9": 1,
        f"{A} ring.seconds < plain.seconds": 0,  # the cost model's estimates, not the clock
        f"{A} schedule_seconds(t, 1.0, 3.0) >= schedule_seconds(u, 1.0, 3.0)": 0,
        f"{A} report.seconds > other.seconds * (1 + MARGIN)": 0,
        f"{A} report.seconds == 0.0": 0,  # equality of a recorded value is no bound on the clock
        f"{A} len(rows) < 10": 0,
        f"{A} report.seconds > 0": 0,  # it was measured at all
        f"import time\nt, c = time.monotonic(), time.process_time()\n{A} time.process_time() - c < 6": 0,
        f"import time\nt, c = time.monotonic(), time.process_time()\n{A} time.monotonic() - t < 6": 1,
        f"import time\ncpu = time.process_time()\nf()\n{A} time.process_time() - cpu < 60": 0,
    }
    got = {source: len(clock_assertions(source)) for source in timed}
    assert got == timed
