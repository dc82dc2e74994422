"""Mutations: plausible learner mistakes made from an answer cell's own text (grading/mutants.py runs them).

The AST transformer below finds the sites of an answer cell between its solution markers and makes one
mistake at a time: swapped axis names, one collective in place of another, a collective removed or
applied twice, a ppermute ring reversed or shifted, swapped matmul operands, a wrong reduction axis,
off-by-one bounds, a changed dtype, a PartitionSpec entry swapped or dropped, and a few generic
operator and constant changes. Each mutation is spliced into the cell's own text (comments and layout
kept), so its diff shows only the lines it changes; its fingerprint names the function, the kind of
mutation and those lines. :func:`mutants_of` gives every distinct, compilable mutant of one cell.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from grading.assignment import solution_span


def clone(node):
    """A deep copy of an AST (node, list of nodes or leaf) made of its fields and positions only.

    Not ``copy.deepcopy``: CPython shares one instance of each context and operator (``ast.Load()``,
    ``ast.Add()``…) between all trees, and a library that annotates nodes (``executing``, behind
    IPython's tracebacks, sets ``.parent`` on every node it walks) hangs a whole foreign tree on those
    shared instances. deepcopy then copies that tree with every ``Name``: in a test process that had
    shown a traceback, generating one assignment's mutants went from 0.3 s to over a minute.
    """
    if isinstance(node, ast.AST):
        fields = {f: clone(getattr(node, f)) for f in node._fields if hasattr(node, f)}
        where = {a: getattr(node, a) for a in node._attributes if hasattr(node, a)}
        return type(node)(**fields, **where)
    if isinstance(node, list):
        return [clone(n) for n in node]
    return node


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
    return ast.BinOp(clone(node), ast.Add() if k > 0 else ast.Sub(), ast.Constant(abs(k)))


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
        new = clone(node)
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
                yield "transpose_dropped", [(i, _on(ast.Attribute, lambda n: clone(n.value)))]
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
            yield "unary_dropped", [(i, _on(ast.UnaryOp, lambda n: clone(n.operand)))]
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
    new = clone(node)
    setattr(new, bound, plus(getattr(node, bound), k))
    return new


def _call_mutations(i: int, node: ast.Call) -> Iterator[tuple[str, list[Edit]]]:
    name = call_name(node)
    if name in COLLECTIVE_SWAPS and isinstance(node.func, ast.Attribute):
        for other in COLLECTIVE_SWAPS[name]:
            yield "collective_swapped", [(i, _on(ast.Call, partial(_swap_collective, other=other)))]
    if name in REMOVABLE and node.args:
        yield "call_removed", [(i, _on(ast.Call, lambda n: clone(n.args[0])))]
    for j, keyword in enumerate(node.keywords):  # a keyword forgotten: out_sharding=, precision=, tiled=...
        if keyword.arg is not None:
            yield "keyword_dropped", [(i, _on(ast.Call, partial(_keyword_dropped, j=j)))]
    if name in REDUCTIONS and isinstance(node.func, ast.Attribute):  # jnp.mean(x) and x.mean() alike
        for other in REDUCTIONS[name]:
            yield "reduction_swapped", [(i, _on(ast.Call, partial(_reduction_swapped, other=other)))]
    if name in REPEATABLE and node.args:
        yield (
            "collective_twice",
            [(i, _on(ast.Call, lambda n: ast.Call(n.func, [clone(n), *n.args[1:]], n.keywords)))],
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
    new = clone(node)
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
    new = clone(node)
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
    made = _applied(source, tree, sites, edits)
    return made and made[0]


#: (a tree, its ast.dump): the tree :func:`apply` is called with for every mutant of one cell.
_last_dump: tuple[ast.AST | None, str] = (None, "")


def _dump_of(tree: ast.AST) -> str:
    """``ast.dump(tree)``, computed once for the cell's tree that every one of its mutants is compared
    with (:func:`apply`)."""
    global _last_dump
    held, dump = _last_dump
    if held is not tree:
        dump = ast.dump(tree)
        _last_dump = (tree, dump)
    return dump


def _applied(source: str, tree: ast.AST, sites: Sites, edits: list[Edit]) -> tuple[str, str] | None:
    """:func:`apply`'s text and ``ast.dump`` of its parse (which tells mutants apart), or None."""
    mutated = clone(tree)
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
    if target == _dump_of(tree):
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
                return text, target
        except SyntaxError:
            continue
    try:
        text = ast.unparse(mutated)
        compile(text, "<mutant>", "exec")
        return text, target  # target is the dump of this very text's parse
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
    seen = {_dump_of(tree)}
    out: list[Mutant] = []
    used: dict[str, int] = {}
    for kind, edits in candidate_mutations(sites, axes):
        made = _applied(source, tree, sites, edits)
        if made is None:
            continue
        text, key = made
        if key in seen:
            continue
        seen.add(key)
        diff = _diff(function, source, text)
        fp = fingerprint(function, kind, diff)
        used[fp] = used.get(fp, 0) + 1
        if used[fp] > 1:
            fp = f"{fp}-{used[fp]}"
        out.append(Mutant(assignment, function, kind, fp, diff, text))
    return out


# Hard-coding: a value the function reads, written down as the self-check's first configuration has it --

#: Attributes whose value a learner may write down instead of reading it: sizes, shapes, dtypes, names.
READ_ATTRIBUTES = {"shape", "ndim", "size", "dtype", "axis_names", "axis_sizes", "axis_types"}
#: Calls that read a size of the job or of a mesh axis.
READ_CALLS = {"len", "process_count", "device_count", "local_device_count", "axis_size", "process_index"}
PROBE = "__hardcoding_probe__"


def _function_args(tree: ast.AST) -> set[str]:
    """The parameter names of the cell's top-level functions."""
    names: set[str] = set()
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    return names


def hardcoding_sites(sites: Sites) -> list[int]:
    """Indices (in ``sites.nodes``) of the expressions whose value comes from the mesh, the arguments or
    a pytree: ``x.shape[0]``, ``mesh.shape["Y"]``, ``b.shape``, ``x.dtype``, ``len(params)``,
    ``jax.process_count()``, and each load of a name (a pytree of arrays: its keys are what is
    written down). Outermost first; an inner read of a site already taken is left out."""
    taken: list[int] = []
    inside: set[int] = set()
    root = sites.nodes[0]
    local = _function_args(root) | {
        n.id for n in ast.walk(root) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    for i, node in enumerate(sites.nodes):
        if not sites.inside(node) or id(node) in inside or not isinstance(node, ast.expr):
            continue
        read = False
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
            read = node.value.attr in READ_ATTRIBUTES and not isinstance(node.slice, ast.Slice)
        elif isinstance(node, ast.Attribute):
            read = node.attr in READ_ATTRIBUTES
        elif isinstance(node, ast.Call):
            read = call_name(node) in READ_CALLS
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            read = node.id in local  # a pytree's names, or a Mesh parameter: known once probed
        if read and not _is_store_target(sites, node):
            taken.append(i)
            inside |= {id(n) for n in ast.walk(node)}
    return taken


def _is_store_target(sites: Sites, node: ast.AST) -> bool:
    parent = sites.parent.get(id(node), (None, "", None))[0]
    return isinstance(parent, (ast.Assign, ast.AugAssign)) and getattr(parent, "targets", [None])[0] is node


def parameters(tree: ast.AST) -> list[str]:
    """The parameters of the cell's top-level functions, in order (probed as sites -1, -2, …)."""
    out: list[str] = []
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            out += [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    return out


def instrumented(source: str, sites_list: list[int]) -> str:
    """The cell with each site ``e`` wrapped as ``__hardcoding_probe__(k, e)`` (k: its place in the list),
    and each top-level function's parameters probed as it starts (site -1 - j for the j-th parameter)."""
    tree = ast.parse(source)
    msites = Sites(tree, *solution_lines(source))
    for k, i in enumerate(sites_list):
        node = msites.nodes[i]
        wrapped = ast.Call(ast.Name(PROBE, ast.Load()), [ast.Constant(k), clone(node)], [])
        msites.replace(node, wrapped)
    j = 0
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            probes = []
            for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                call = ast.Call(
                    ast.Name(PROBE, ast.Load()), [ast.Constant(-1 - j), ast.Name(x.arg, ast.Load())], []
                )
                probes.append(ast.Expr(call))
                j += 1
            docstring = ast.get_docstring(node, clean=False) is not None
            node.body[int(docstring) : int(docstring)] = probes
    return ast.unparse(ast.fix_missing_locations(tree))


def literal(value: object, expression: str) -> str | None:
    """The text a learner would write for ``value`` (read by ``expression``), or None if none fits."""
    import numpy as np

    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    if isinstance(value, np.dtype):
        return f"np.dtype({value.name!r})"
    if isinstance(value, tuple) and all(isinstance(v, (int, str)) or v is None for v in value):
        return repr(value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
            return repr(dict(value))  # mesh.shape
        return f"{{k: {expression}[k] for k in {tuple(value)!r}}}"  # a pytree's names written down
    if hasattr(value, "items") and all(isinstance(v, int) for _, v in value.items()):
        return repr(dict(value.items()))
    return None


def hardcoding_mutants(
    assignment: str,
    function: str,
    source: str,
    first: dict[int, object],
    global_meshes: list[str],
    mesh_type: type | None = None,
) -> list[Mutant]:
    """The hard-coding mutants of one answer cell.

    ``first``: site (its place in :func:`hardcoding_sites`'s list) -> its value in the self-check's
    first configuration, for the sites whose value the tests vary (a value the contract fixes, such as
    a dtype every test keeps, makes no mutant). Each such site is replaced by that value written out;
    each parameter whose first value is a ``mesh_type`` is replaced by the first of ``global_meshes``
    (the notebook's Mesh globals), the parameter renamed ``<name>_given`` and left unused.
    """
    tree = ast.parse(source)
    lo, hi = solution_lines(source)
    sites = Sites(tree, lo, hi)
    found = hardcoding_sites(sites)
    names = parameters(tree)
    mesh_parameters = [
        names[-1 - k]
        for k, v in first.items()
        if k < 0 and mesh_type is not None and isinstance(v, mesh_type)
    ]
    edits: list[tuple[str, list[Edit]]] = []
    for k, i in enumerate(found):
        if k not in first:
            continue
        node, value = sites.nodes[i], first[k]
        if isinstance(node, ast.Name) and not isinstance(value, dict):
            continue  # a plain name: only a pytree's keys are written down
        text = literal(value, ast.unparse(node))
        if text is not None:
            edits.append(("hardcoded", [(i, partial(_parsed, text=text))]))
    out = _distinct(assignment, function, source, tree, sites, edits)
    if global_meshes:
        for name in dict.fromkeys(mesh_parameters):
            text = _mesh_parameter_to_global(source, tree, lo, hi, name, global_meshes[0])
            if text is not None:
                used = {m.fingerprint for m in out}
                out += _as_mutants(assignment, function, source, [("global_mesh", text)], used)
    return out


def _parsed(_node: ast.AST, text: str) -> ast.AST:
    return ast.parse(text, mode="eval").body


def _mesh_parameter_to_global(
    source: str, tree: ast.AST, lo: int, hi: int, name: str, global_name: str
) -> str | None:
    """The cell with parameter ``name`` renamed ``<name>_given`` (unused) and the function reading
    ``global_name`` wherever it read ``name``: a mesh argument replaced by the notebook's global mesh."""
    spans: list[tuple[ast.AST, str]] = []
    reads = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg == name:
            annotation = f": {ast.unparse(node.annotation)}" if node.annotation else ""
            spans.append((node, f"{name}_given{annotation}"))
        elif isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            at = position(node)
            if at and lo <= at[0] <= hi:
                reads += 1
                if global_name != name:
                    spans.append((node, global_name))
    if not reads:
        return None  # the answer never reads its mesh argument (it uses the mesh of jax.set_mesh)
    text = _splice(source, spans)
    try:
        compile(text, "<mutant>", "exec")
    except SyntaxError:
        return None
    return text


def _distinct(assignment, function, source, tree, sites, edits) -> list[Mutant]:
    texts = []
    for kind, es in edits:
        text = apply(source, tree, sites, es)
        if text is not None:
            texts.append((kind, text))
    return _as_mutants(assignment, function, source, texts, set())


def _diff(function: str, source: str, text: str) -> str:
    """The mutant's change to the solution's function, as a unified diff with one line of context."""
    return "".join(
        difflib.unified_diff(
            source.splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"solution/{function}",
            f"mutant/{function}",
            n=1,
        )
    )


def _as_mutants(assignment, function, source, texts, used: set[str]) -> list[Mutant]:
    out, seen = [], {ast.dump(ast.parse(source))}
    for kind, text in texts:
        key = ast.dump(ast.parse(text))
        if key in seen:
            continue
        seen.add(key)
        diff = _diff(function, source, text)
        fp = fingerprint(function, kind, diff)
        while fp in used:
            fp += "+"
        used.add(fp)
        out.append(Mutant(assignment, function, kind, fp, diff, text))
    return out
