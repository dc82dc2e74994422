"""Mutation testing of the graders: plausible wrong answers made from the reference solutions.

Run as ``python -m grading.mutants [--assignment 01_meshes] [--sample N] [--jobs J]`` (``make mutants``).

From each reference solution (``solutions/<a>/<a>.ipynb``) every answer cell is mutated by the AST
transformer below, one plausible learner mistake at a time: swapped axis names, one collective in
place of another, a collective removed or applied twice, a ppermute ring reversed or shifted, swapped
matmul operands, a wrong reduction axis, off-by-one bounds, a changed dtype, a PartitionSpec entry
swapped or dropped, and a few generic operator and constant changes. One worker process per
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
import ast
import copy
import difflib
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from grading.assignment import SETUP, Assignment, grade_id, is_answer, is_test, run_cell, solution_span

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EQUIVALENT_FILE = ROOT / "grading" / "mutants_equivalent.toml"
OUT_DIR = ROOT / "_build" / "mutants"
THRESHOLD = 0.95
TIMEOUT_S = 60

# Mutation vocabulary ------------------------------------------------------------------------------

# Collectives a learner swaps for one another; a name maps to its plausible replacements.
COLLECTIVE_SWAPS = {
    "psum": ["pmean", "pmax", "psum_scatter"],
    "pmean": ["psum"],
    "pmax": ["psum"],
    "pmin": ["psum"],
    "psum_scatter": ["psum", "all_gather"],
    "all_gather": ["psum", "psum_scatter"],
    "all_to_all": ["all_gather"],
    "ppermute": [],
    "pcast": [],
}
# Calls whose removal (replaced by their operand) or repetition is a plausible mistake.
REMOVABLE = {*COLLECTIVE_SWAPS, "with_sharding_constraint", "reshard", "reversed", "sorted", "relu", "tanh"}
REDUCTIONS = {"mean": ["sum"], "sum": ["mean"], "cumsum": ["cumprod"], "argsort": ["sort"]}  # jnp.<name>(...)
REPEATABLE = {"psum", "pmean", "psum_scatter", "all_gather", "all_to_all", "ppermute"}
MATMULS = {"matmul", "dot"}  # swap the first two arguments
DTYPES = {
    "float32": ["bfloat16", "float16"],
    "bfloat16": ["float32", "float16"],
    "float16": ["float32", "bfloat16"],
    "float64": ["float32"],
    "int32": ["float32"],
}
DTYPE_MODULES = {"jnp", "np", "numpy", "jax.numpy"}
AXIS_KEYWORDS = re.compile(r"axis|dimension|argnums")
BINOP_SWAPS: dict[type, list[type]] = {
    ast.Add: [ast.Sub],
    ast.Sub: [ast.Add],
    ast.Mult: [ast.Div],
    ast.Div: [ast.Mult, ast.FloorDiv],
    ast.FloorDiv: [ast.Div],
    ast.Mod: [ast.FloorDiv],
    ast.Pow: [ast.Mult],
}
COMPARE_SWAPS: dict[type, list[type]] = {
    ast.Lt: [ast.LtE, ast.Gt],
    ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE],
    ast.Eq: [ast.NotEq],
    ast.NotEq: [ast.Eq],
    ast.In: [ast.NotIn],
    ast.NotIn: [ast.In],
    ast.Is: [ast.IsNot],
    ast.IsNot: [ast.Is],
}


def call_name(node: ast.AST) -> str | None:
    """``psum`` for ``jax.lax.psum(...)`` or ``psum(...)``; None for anything else."""
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return None


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def plus(node: ast.expr, k: int) -> ast.expr:
    """``node + k`` (or ``node - |k|``), folded when node is an integer constant."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return ast.Constant(node.value + k)
    return ast.BinOp(copy.deepcopy(node), ast.Add() if k > 0 else ast.Sub(), ast.Constant(abs(k)))


# A mutation: a kind, and edits (node index in traversal order -> function building its replacement).
Build = Callable[[ast.AST], ast.AST]
Edit = tuple[int, Build]
# The node classes that carry a source position (lineno .. end_col_offset).
POSITIONED = (
    ast.expr,
    ast.stmt,
    ast.keyword,
    ast.arg,
    ast.alias,
    ast.excepthandler,
    ast.pattern,
    ast.type_param,
)


def position(node: ast.AST) -> tuple[int, int, int, int] | None:
    """(lineno, col_offset, end_lineno, end_col_offset) of a parsed node; None for one without."""
    if isinstance(node, POSITIONED) and node.end_lineno is not None and node.end_col_offset is not None:
        return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset
    return None


@dataclass
class Mutant:
    assignment: str
    function: str
    kind: str
    fingerprint: str
    diff: str
    source: str = field(repr=False)
    status: str = ""  # killed | survived | timeout | equivalent
    killed_by: str = ""  # the test cell that failed, and the first line of its message
    seconds: float = 0.0


class Sites:
    """The nodes of one answer cell in source order, with their parents, inside the solution block."""

    def __init__(self, tree: ast.AST, lo: int, hi: int):
        self.nodes: list[ast.AST] = []
        self.parent: dict[int, tuple[ast.AST, str, int | None]] = {}
        self.lo, self.hi = lo, hi
        self._walk(tree)

    def _walk(self, node: ast.AST) -> None:
        self.nodes.append(node)
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        self.parent[id(child)] = (node, name, i)
                        self._walk(child)
            elif isinstance(value, ast.AST):
                self.parent[id(value)] = (node, name, None)
                self._walk(value)

    def inside(self, node: ast.AST) -> bool:
        at = position(node)
        return at is not None and self.lo <= at[0] and at[2] <= self.hi

    def replace(self, node: ast.AST, new: ast.AST) -> None:
        parent, name, i = self.parent[id(node)]
        if i is None:
            setattr(parent, name, new)
        else:
            getattr(parent, name)[i] = new


def _const(value: str | int) -> Build:
    return lambda _node: ast.Constant(value)


def _on[Node: ast.AST](kind: type[Node], build: Callable[[Node], ast.AST]) -> Build:
    """``build`` for the edited copy's node, which is of the same class as the original's, ``kind``."""

    def checked(node: ast.AST) -> ast.AST:
        if not isinstance(node, kind):
            raise TypeError(f"expected an ast.{kind.__name__} to mutate, got ast.{type(node).__name__}")
        return build(node)

    return checked


def _set(**changes: object) -> Build:
    def build(node: ast.AST) -> ast.AST:
        new = copy.deepcopy(node)
        for k, v in changes.items():
            setattr(new, k, v)
        return new

    return build


def candidate_mutations(sites: Sites, axes: set[str]) -> Iterator[tuple[str, list[Edit]]]:
    """Every (kind, edits) for the cell, in a fixed order: source order of the node, then kind."""
    nodes = sites.nodes
    axis_nodes: list[int] = []
    for i, node in enumerate(nodes):
        if not sites.inside(node):
            continue
        parent = sites.parent.get(id(node), (None, "", None))
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str) and v in axes:
                axis_nodes.append(i)
                for other in sorted(axes - {v}):
                    yield "axis_name", [(i, _const(other))]
            elif isinstance(v, bool):
                yield "bool_flip", [(i, _const(not v))]
            elif type(v) is int:
                owner = parent[0]
                if isinstance(owner, ast.Tuple):
                    owner = sites.parent.get(id(owner), (None, "", None))[0]
                if isinstance(owner, ast.keyword) and owner.arg and AXIS_KEYWORDS.search(owner.arg):
                    for axis in (0, 1, -1):
                        if axis != v:
                            yield "reduction_axis", [(i, _const(axis))]
                yield "constant", [(i, _const(v + 1))]
                if v != 0:
                    yield "constant", [(i, _const(v - 1))]
        elif isinstance(node, ast.Attribute):
            if node.attr in DTYPES and dotted(node.value) in DTYPE_MODULES:
                for other in DTYPES[node.attr]:
                    yield "dtype", [(i, _set(attr=other))]
            elif node.attr == "T":
                yield "transpose_dropped", [(i, _on(ast.Attribute, lambda n: copy.deepcopy(n.value)))]
        elif isinstance(node, ast.Call):
            yield from _call_mutations(i, node)
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                yield (
                    "operands_swapped",
                    [(i, _on(ast.BinOp, lambda n: ast.BinOp(n.right, ast.MatMult(), n.left)))],
                )
            for op in BINOP_SWAPS.get(type(node.op), []):
                yield "operator", [(i, _set(op=op()))]
        elif isinstance(node, ast.AugAssign):
            for op in BINOP_SWAPS.get(type(node.op), []):
                yield "operator", [(i, _set(op=op()))]
        elif isinstance(node, ast.Subscript) and not isinstance(
            node.slice, (ast.Slice, ast.Tuple, ast.Constant)
        ):
            for k in (1, -1):
                yield "off_by_one", [(i, _on(ast.Subscript, partial(_subscript_plus, k=k)))]
        elif isinstance(node, ast.keyword) and node.arg in ("reduced", "unreduced"):
            yield "spec_keyword", [(i, _set(arg="unreduced" if node.arg == "reduced" else "reduced"))]
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            for op in COMPARE_SWAPS.get(type(node.ops[0]), []):
                yield "comparison", [(i, _set(ops=[op()]))]
        elif isinstance(node, ast.BoolOp):
            yield "boolean", [(i, _set(op=ast.Or() if isinstance(node.op, ast.And) else ast.And()))]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            yield "unary_dropped", [(i, _on(ast.UnaryOp, lambda n: copy.deepcopy(n.operand)))]
        elif isinstance(node, ast.Slice):
            for bound in ("lower", "upper"):
                b = getattr(node, bound)
                if b is not None and not (isinstance(b, ast.Constant) and type(b.value) is int):
                    for k in (1, -1):
                        yield "off_by_one", [(i, _on(ast.Slice, partial(_bound, bound=bound, k=k)))]
    if len(axis_nodes) > 1 and len(axes) == 2:
        a, b = sorted(axes)
        swap = {a: b, b: a}
        yield "axes_swapped_everywhere", [(j, _const(swap[axis_value(nodes[j])])) for j in axis_nodes]


def axis_value(node: ast.AST) -> str:
    """The axis name of an ``axis_nodes`` entry: a string constant."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        raise TypeError(f"expected a string constant, got ast.{type(node).__name__}")
    return node.value


def _subscript_plus(node: ast.Subscript, k: int) -> ast.AST:
    return _set(slice=plus(node.slice, k))(node)


def _bound(node: ast.Slice, bound: str, k: int) -> ast.Slice:
    new = copy.deepcopy(node)
    setattr(new, bound, plus(getattr(node, bound), k))
    return new


def _call_mutations(i: int, node: ast.Call) -> Iterator[tuple[str, list[Edit]]]:
    name = call_name(node)
    if name in COLLECTIVE_SWAPS and isinstance(node.func, ast.Attribute):
        for other in COLLECTIVE_SWAPS[name]:
            yield "collective_swapped", [(i, _on(ast.Call, partial(_swap_collective, other=other)))]
    if name in REMOVABLE and node.args:
        yield "call_removed", [(i, _on(ast.Call, lambda n: copy.deepcopy(n.args[0])))]
    for j, keyword in enumerate(node.keywords):  # a keyword forgotten: out_sharding=, precision=, tiled=...
        if keyword.arg is not None:
            yield "keyword_dropped", [(i, _on(ast.Call, partial(_keyword_dropped, j=j)))]
    if name in REDUCTIONS and isinstance(node.func, ast.Attribute):  # jnp.mean(x) and x.mean() alike
        for other in REDUCTIONS[name]:
            yield "reduction_swapped", [(i, _on(ast.Call, partial(_reduction_swapped, other=other)))]
    if name in REPEATABLE and node.args:
        yield (
            "collective_twice",
            [(i, _on(ast.Call, lambda n: ast.Call(n.func, [copy.deepcopy(n), *n.args[1:]], n.keywords)))],
        )
    if name == "ppermute":
        perm_at = 2 if len(node.args) > 2 else None
        if perm_at is not None or any(k.arg == "perm" for k in node.keywords):
            yield "ppermute_reversed", [(i, _on(ast.Call, partial(_perm, at=perm_at, reverse=True)))]
            yield "ppermute_shifted", [(i, _on(ast.Call, partial(_perm, at=perm_at, reverse=False)))]
    if name in MATMULS and len(node.args) >= 2:
        yield (
            "operands_swapped",
            [(i, _on(ast.Call, lambda n: _set(args=[n.args[1], n.args[0], *n.args[2:]])(n)))],
        )
    if name in ("P", "PartitionSpec"):
        args = node.args
        for j in range(len(args) - 1):
            if ast.dump(args[j]) != ast.dump(args[j + 1]):
                yield "spec_swapped", [(i, _on(ast.Call, partial(_args_swapped, j=j)))]
        for j, a in enumerate(args):
            if not (isinstance(a, ast.Constant) and a.value is None):
                yield "spec_entry_dropped", [(i, _on(ast.Call, partial(_none_at, j=j)))]
    if name == "range" and node.args:
        stop = 0 if len(node.args) == 1 else 1
        for k in (1, -1):
            yield "off_by_one", [(i, _on(ast.Call, partial(_plus_at, j=stop, k=k)))]
        if len(node.args) >= 2:
            yield "off_by_one", [(i, _on(ast.Call, partial(_plus_at, j=0, k=1)))]


# Builders of a mutated call, from the copy of the original call that they are given.


def _keyword_dropped(node: ast.Call, j: int) -> ast.AST:
    return _set(keywords=node.keywords[:j] + node.keywords[j + 1 :])(node)


def _reduction_swapped(node: ast.Call, other: str) -> ast.AST:
    """``jnp.mean(x)`` -> ``jnp.<other>(x)``; ``x.mean()`` -> ``x.<other>()``."""
    if not isinstance(node.func, ast.Attribute):
        raise TypeError("only a method or module function's reduction is swapped")
    return _set(func=ast.Attribute(node.func.value, other))(node)


def _args_swapped(node: ast.Call, j: int) -> ast.AST:
    args = list(node.args)
    args[j], args[j + 1] = args[j + 1], args[j]
    return _set(args=args)(node)


def _none_at(node: ast.Call, j: int) -> ast.AST:
    args = list(node.args)
    args[j] = ast.Constant(None)
    return _set(args=args)(node)


def _plus_at(node: ast.Call, j: int, k: int) -> ast.AST:
    args = list(node.args)
    args[j] = plus(args[j], k)
    return _set(args=args)(node)


def _swap_collective(node: ast.Call, other: str) -> ast.Call:
    """``lax.psum(x, 'Y')`` -> ``lax.<other>(x, 'Y')``, keyword names carried across where they differ."""
    new = copy.deepcopy(node)
    if not isinstance(new.func, ast.Attribute):
        raise TypeError("only a module function's collective (lax.psum) is swapped")
    new.func.attr = other
    rename: dict[str | None, str] = {"scatter_dimension": "axis", "axis": "scatter_dimension"}
    keep = {
        "psum": set(),
        "pmean": set(),
        "pmax": set(),
        "psum_scatter": {"scatter_dimension", "tiled"},
        "all_gather": {"axis", "tiled"},
    }.get(other, {k.arg for k in node.keywords})
    keywords = []
    for k in new.keywords:
        arg = k.arg if k.arg in keep else rename.get(k.arg)
        if arg in keep:
            keywords.append(ast.keyword(arg, k.value))
    if other in ("psum_scatter", "all_gather") and not any(k.arg == "tiled" for k in keywords):
        keywords.append(ast.keyword("tiled", ast.Constant(True)))
    new.keywords = keywords
    new.args = new.args[:2]
    return new


def _perm(node: ast.Call, at: int | None, reverse: bool) -> ast.Call:
    """The ppermute's pairs (src, dst) reversed to (dst, src), or each dst moved one further on the ring."""
    new = copy.deepcopy(node)
    perm = new.args[at] if at is not None else next(k.value for k in new.keywords if k.arg == "perm")
    if reverse:
        text = f"[(dst, src) for src, dst in {ast.unparse(perm)}]"
    else:
        text = f"[(src, (dst + 1) % len({ast.unparse(perm)})) for src, dst in {ast.unparse(perm)}]"
    replacement = ast.parse(text, mode="eval").body
    if at is not None:
        new.args[at] = replacement
    else:
        next(k for k in new.keywords if k.arg == "perm").value = replacement
    return new


# Splicing a mutation into the cell's own text ------------------------------------------------------


def _offsets(source: str) -> list[int]:
    starts, total = [0], 0
    for line in source.encode().splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _splice(source: str, spans: list[tuple[ast.AST, str]]) -> str:
    data, starts = source.encode(), _offsets(source)
    located = []
    for node, text in spans:
        at = position(node)
        if at is None:
            raise ValueError(f"ast.{type(node).__name__} has no source position to splice at")
        located.append((at, text))
    for (line, col, end_line, end_col), text in sorted(located, key=lambda s: s[0][:2], reverse=True):
        a = starts[line - 1] + col
        b = starts[end_line - 1] + end_col
        data = data[:a] + text.encode() + data[b:]
    return data.decode()


def apply(source: str, tree: ast.AST, sites: Sites, edits: list[Edit]) -> str | None:
    """The cell's source with the edits made, changing only the edited spans; None if it won't compile."""
    mutated = copy.deepcopy(tree)
    msites = Sites(mutated, sites.lo, sites.hi)
    replacements = []
    for i, build in edits:
        original = msites.nodes[i]
        new = build(original)
        replacements.append((sites.nodes[i], original, new))
    for _, original, new in replacements:
        msites.replace(original, new)
    try:  # compared as text would parse: a Constant(-1) reads back as -(1)
        target = ast.dump(ast.parse(ast.unparse(mutated)))
    except (SyntaxError, ValueError):
        return None
    if target == ast.dump(tree):
        return None
    double = source.count('"') > source.count("'")  # keep the cell's quotes: "X" stays "X", not 'X'

    def text_of(new: ast.AST) -> str:
        text = ast.unparse(new)
        return re.sub(r"'(\w*)'", r'"\1"', text) if double else text

    for wrap in (False, True):
        spans = [(node, f"({text_of(new)})" if wrap else text_of(new)) for node, _, new in replacements]
        text = _splice(source, spans)
        try:
            if ast.dump(ast.parse(text)) == target:
                compile(text, "<mutant>", "exec")
                return text
        except SyntaxError:
            continue
    try:
        text = ast.unparse(mutated)
        compile(text, "<mutant>", "exec")
        return text
    except (SyntaxError, ValueError):
        return None


def fingerprint(function: str, kind: str, diff: str) -> str:
    """Stable across unrelated edits: the function, the kind, and the changed lines' text."""
    changed = [
        line[0] + line[1:].strip()
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    digest = hashlib.sha1("\n".join([function, kind, *changed]).encode()).hexdigest()[:10]
    return f"{function}/{kind}/{digest}"


def solution_lines(source: str) -> tuple[int, int]:
    """The 1-based lines of an answer cell's solution markers (the whole cell where it has none)."""
    return solution_span(source)


def mutants_of(assignment: str, function: str, source: str, axes: set[str]) -> list[Mutant]:
    """Every distinct, compilable mutant of one answer cell, in a fixed order."""
    tree = ast.parse(source)
    lo, hi = solution_lines(source)
    sites = Sites(tree, lo, hi)
    seen = {ast.dump(tree)}
    out: list[Mutant] = []
    used: dict[str, int] = {}
    for kind, edits in candidate_mutations(sites, axes):
        text = apply(source, tree, sites, edits)
        if text is None:
            continue
        key = ast.dump(ast.parse(text))
        if key in seen:
            continue
        seen.add(key)
        diff = "".join(
            difflib.unified_diff(
                source.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"solution/{function}",
                f"mutant/{function}",
                n=1,
            )
        )
        fp = fingerprint(function, kind, diff)
        used[fp] = used.get(fp, 0) + 1
        if used[fp] > 1:
            fp = f"{fp}-{used[fp]}"
        out.append(Mutant(assignment, function, kind, fp, diff, text))
    return out


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
    mutants = [m for m in sample(all_mutants(nb), n) if not only or m.fingerprint in only or m.kind in only]
    base = base_namespace(nb)
    for fn, cells in nb.tests.items():  # the reference must pass, or every mutant would look killed
        if fn not in {m.function for m in mutants}:
            continue
        failed = run_cells(cells, fresh(base))
        if failed:
            raise SystemExit(f"{assignment}: the solution fails {failed[0]}: {failed[1]}")
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
        rows.append({"assignment": assignment, "function": fn, "mutants": len(mine), **count, "rate": rate})
    return rows


def write_report(assignment: str, mutants: list[dict], rows: list[dict], seconds: float) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"{assignment}.json").write_text(json.dumps({"rows": rows, "mutants": mutants}, indent=1))
    lines = [f"# Mutants of {assignment}", "", f"Run time {seconds:.0f} s.", ""]
    lines += [
        "| function | mutants | killed | timeout | equivalent | unkillable on CPU | survived | kill rate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['function']} | {r['mutants']} | {r['killed']} | {r['timeout']} | {r['equivalent']} "
            f"| {r['unkillable']} | {r['survived']} | {r['rate']:.1%} |"
        )
    titles = {"survived": "Survived", "equivalent": "Equivalent", "unkillable": "Unkillable on CPU"}
    for status, title in titles.items():
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
    if args.list:
        for a in assignments:
            for m in sample(all_mutants(load(a)), args.sample):
                print(f"== {a} {m.fingerprint}\n{m.diff}")
        return 0
    start = time.perf_counter()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(
            pool.map(lambda a: run_assignment(a, args.sample, args.timeout, args.only), assignments)
        )
    rows = [r for result in results for r in result[0]]
    print(
        f"\n{'function':<40} {'mutants':>7} {'killed':>6} {'t/o':>4} {'equiv':>5} {'cpu':>4} "
        f"{'surv':>4} {'rate':>7}"
    )
    for r in rows:
        name = f"{r['assignment']}:{r['function']}"
        print(
            f"{name:<40} {r['mutants']:>7} {r['killed']:>6} {r['timeout']:>4} {r['equivalent']:>5} "
            f"{r['unkillable']:>4} {r['survived']:>4} {r['rate']:>7.1%}"
        )
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
