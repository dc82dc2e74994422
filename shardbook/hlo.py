"""A small parser for the text of a compiled XLA program (``compiled.as_text()``).

It reads just enough of the HLO text format for :mod:`shardbook.comms` and :mod:`shardbook.cost`:
computations and their instructions (name, result type, opcode, operands, attributes), the called
computations of fusions, loops and reducers, the source locations in the module header, and the three
spellings of ``replica_groups``; :func:`without_debug_info` gives the text two compiles of one program
share. It imports nothing from JAX, so it can be tested on plain strings.

Example:
  >>> m = parse_module('''HloModule m
  ... ENTRY %main (p: f32[4]) -> f32[4] {
  ...   %p = f32[4]{0} parameter(0)
  ...   ROOT %r = f32[4]{0} all-reduce(%p), replica_groups=[4,2]<=[8], to_apply=%add
  ... }''')
  >>> m.entry.root.opcode, parse_replica_groups(m.entry.root.attr("replica_groups"))
  ('all-reduce', [[0, 1], [2, 3], [4, 5], [6, 7]])
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

# bytes per element of each HLO element type
DTYPE_BYTES = {
    "pred": 1, "s2": 1, "u2": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
    "f8e4m3b11fnuz": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "f8e4m3": 1, "f8e3m4": 1, "f8e8m0fnu": 1,
    "f4e2m1fn": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8,
    "u64": 8, "f64": 8, "c64": 8, "c128": 16, "token": 0,
}  # fmt: skip

_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\]")


class HloParseError(ValueError):
    """The text is not HLO this parser understands; the message quotes the part it could not read."""


@dataclass(frozen=True)
class ArrayType:
    """One array in an HLO type: element type and dimensions, e.g. ``bf16[2,8192]``."""

    dtype: str
    dims: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES.get(self.dtype, 4)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


def parse_type(text: str) -> list[ArrayType]:
    """The arrays in an HLO type; a tuple type gives several, layouts (``{1,0}``) are ignored."""
    return [
        ArrayType(m.group(1), tuple(int(d) for d in m.group(2).split(",") if d))
        for m in _ARRAY_RE.finditer(re.sub(r"\{[^{}]*\}", "", text))
    ]


def tuple_elements(text: str) -> list[str]:
    """The top-level elements of a type's text, layouts kept; an array type is its own one element.

    Example:
      >>> tuple_elements("(f32[8]{0:T(256)S(1)}, (s32[], u32[]), f32[2,2]{1,0})")
      ['f32[8]{0:T(256)S(1)}', '(s32[], u32[])', 'f32[2,2]{1,0}']
    """
    text = _COMMENT_RE.sub("", text.strip())
    if not text.startswith("("):
        return [text]
    return [t.strip() for t in _split_top(text[1:-1]) if t.strip()]


#: What an attribute naming a called computation starts with (Instruction.called reads these).
_CALLING_KEYS = (
    "calls=", "to_apply=", "body=", "condition=", "branch_computations=", "true_computation=",
    "false_computation=",
)  # fmt: skip


@dataclass
class Instruction:
    """One HLO instruction: ``%name = type opcode(operands), attributes``."""

    name: str
    type_text: str
    opcode: str
    operands: list[str]
    attrs_text: str
    is_root: bool = False
    computation: str = ""
    operand_text: str = ""  # the raw text between the parentheses, e.g. "0" for parameter(0)
    # what attr(), arrays and called() read from the text, kept with the text they were read from
    _attrs: tuple[str, dict[str, str]] | None = field(default=None, init=False, repr=False, compare=False)
    _arrays: tuple[str, tuple[ArrayType, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _called: tuple[str, tuple[tuple[str, str], ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def arrays(self) -> list[ArrayType]:
        if self._arrays is None or self._arrays[0] is not self.type_text:  # parsed once per text
            self._arrays = (self.type_text, tuple(parse_type(self.type_text)))
        return list(self._arrays[1])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)

    def attr(self, key: str) -> str | None:
        """The raw text of attribute ``key`` (balanced braces/brackets kept), or None."""
        if self._attrs is None or self._attrs[0] is not self.attrs_text:  # parsed once per text
            self._attrs = (self.attrs_text, _attributes(self.attrs_text))
        return self._attrs[1].get(key)

    def called(self) -> list[tuple[str, str]]:
        """(role, computation) pairs this instruction calls: calls, to_apply, body, condition, branches."""
        if self._called is None or self._called[0] is not self.attrs_text:  # read once per text
            self._called = (self.attrs_text, tuple(self._read_called()))
        return list(self._called[1])

    def _read_called(self) -> list[tuple[str, str]]:
        if not any(key in self.attrs_text for key in _CALLING_KEYS):  # most instructions call nothing
            return []
        out = []
        for key in ("calls", "to_apply", "body", "condition"):
            value = self.attr(key)
            if value:
                out += [(key, v.strip().lstrip("%")) for v in value.strip("{}").split(",") if v.strip()]
        branches = self.attr("branch_computations")
        if branches:
            out += [("branch", v.strip().lstrip("%")) for v in branches.strip("{}").split(",") if v.strip()]
        for key in ("true_computation", "false_computation"):
            value = self.attr(key)
            if value:
                out.append(("branch", value.strip().lstrip("%")))
        return out

    def backend_config(self) -> dict:
        text = self.attr("backend_config")
        if not text:
            return {}
        try:
            return json.loads(text)
        except ValueError:
            return {}


@dataclass
class Computation:
    """A named list of instructions in schedule order; ``root`` is the one marked ROOT."""

    name: str
    instructions: list[Instruction] = field(default_factory=list)
    is_entry: bool = False

    def __post_init__(self) -> None:
        self.by_name: dict[str, Instruction] = {}

    @property
    def root(self) -> Instruction:
        for inst in self.instructions:
            if inst.is_root:
                return inst
        return self.instructions[-1]


@dataclass(frozen=True)
class SourceLocation:
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line} ({self.function})"


@dataclass
class Module:
    """A parsed HLO module: computations by name, the entry one, and the source-location tables."""

    name: str
    computations: dict[str, Computation]
    entry: Computation
    stack_frames: dict[int, SourceLocation] = field(default_factory=dict)

    def users(self, computation: Computation) -> dict[str, list[Instruction]]:
        """For each instruction name in ``computation``, the instructions that use it."""
        out: dict[str, list[Instruction]] = {}
        for inst in computation.instructions:
            for op in inst.operands:
                out.setdefault(op, []).append(inst)
        return out

    def source_of(self, inst: Instruction) -> SourceLocation | None:
        """Where in the Python source the instruction came from, when metadata records it."""
        meta = inst.attr("metadata") or ""
        m = re.search(r'source_file="([^"]*)"\s+source_line=(\d+)', meta)
        if m:
            return SourceLocation(m.group(1), int(m.group(2)), "")
        m = re.search(r"stack_frame_id=(\d+)", meta)
        if m:
            return self.stack_frames.get(int(m.group(1)))
        return None

    def op_name(self, inst: Instruction) -> str:
        m = re.search(r'op_name="([^"]*)"', inst.attr("metadata") or "")
        return m.group(1) if m else ""


def _balanced_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``text[start]`` (quotes respected)."""
    if "\\" not in text:  # no escapes: a quoted string is one token (_TOKENS_RE), else char by char
        return _balanced_end_fast(text, start)
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    i = start
    in_str = False
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    raise HloParseError(f"unbalanced brackets in {text[start : start + 80]!r}")


# In text without a backslash: a whole quoted string, an unterminated quote, a bracket or a comma.
# Program text is hundreds of kilobytes, mostly metadata strings: each string is one match.
_TOKENS_RE = re.compile(r'"[^"]*"|"|[(){}\[\],]')
_CLOSER = {"(": ")", "{": "}", "[": "]"}


def _balanced_end_fast(text: str, start: int) -> int:
    """:func:`_balanced_end` for text without a backslash."""
    stack: list[str] = []
    for m in _TOKENS_RE.finditer(text, start):
        c = m.group()
        if c[0] == '"':
            if len(c) == 1:  # a quote never closed: nothing after it counts
                break
        elif c in _CLOSER:
            stack.append(_CLOSER[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return m.end()
    raise HloParseError(f"unbalanced brackets in {text[start : start + 80]!r}")


# What _split_top looks at: a backslash escape, a quote, a bracket or a comma; everything else is copied
# in slices (program text is hundreds of kilobytes, mostly metadata strings).
_SPLIT_RE = re.compile(r'\\.|[(){}\[\]",]', re.S)


def _split_top(text: str) -> list[str]:
    """Splits at commas outside brackets and quoted strings (a backslash escapes inside a string)."""
    if "\\" not in text:
        return _split_top_fast(text)
    parts, depth, start, in_str = [], 0, 0, False
    for m in _SPLIT_RE.finditer(text):
        c = m.group()
        if in_str:
            in_str = c != '"'  # an escaped quote (two characters) does not end the string
            continue
        if len(c) == 2:  # a backslash outside a string is an ordinary character
            c = c[1]
        if c == '"':
            in_str = True
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start : m.end() - 1])
            start = m.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


def _split_top_fast(text: str) -> list[str]:
    """:func:`_split_top` for text without a backslash."""
    parts, depth, start = [], 0, 0
    for m in _TOKENS_RE.finditer(text):
        c = m.group()
        if c[0] == '"':
            if len(c) == 1:  # a quote never closed: nothing after it counts
                break
        elif c == ",":
            if depth == 0:
                parts.append(text[start : m.start()])
                start = m.end()
        elif c in "({[":
            depth += 1
        else:
            depth -= 1
    if start < len(text):
        parts.append(text[start:])
    return parts


def _attributes(attrs: str) -> dict[str, str]:
    """``key=value`` attributes (raw values, the first of a repeated key) of an instruction's text."""
    out: dict[str, str] = {}
    for part in _split_top(attrs):
        key, eq, value = part.strip().partition("=")
        if eq:
            out.setdefault(key, value)
    return out


_HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_COMMENT_RE = re.compile(r"/\*.*?\*/")
_INST_RE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def _parse_instruction(line: str) -> Instruction | None:
    m = _INST_RE.match(line)
    if not m:
        return None
    is_root, name, rest = bool(m.group(1)), m.group(2), m.group(3)
    if rest.startswith("("):  # tuple type
        end = _balanced_end(rest, 0)
    else:
        end = rest.index(" ") if " " in rest else len(rest)
        # a layout may contain spaces only in exotic cases; array types end at the first space
    type_text, rest = rest[:end], rest[end:].strip()
    paren = rest.find("(")
    if paren < 0:
        raise HloParseError(f"no operand list in {line.strip()[:120]!r}")
    opcode = rest[:paren].strip()
    close = _balanced_end(rest, paren)
    # XLA numbers long operand lists with comments: (%a, %b, %c, %d, %e, /*index=5*/%f, ...).
    operand_text = _COMMENT_RE.sub("", rest[paren + 1 : close - 1])
    operands = [
        p.strip().split()[-1].lstrip("%")
        for p in _split_top(operand_text)
        if p.strip() and "%" in p  # literals such as constant(1) have no %name
    ]
    attrs = rest[close:].lstrip(", ").strip()
    return Instruction(name, type_text, opcode, operands, attrs, is_root, operand_text=operand_text.strip())


def parse_module(text: str) -> Module:
    """Parses the text of ``compiled.as_text()`` (or any HLO module text).

    Raises:
      HloParseError: the text has no ENTRY computation or a line cannot be read.
    """
    lines = text.splitlines()
    module_name = ""
    if lines and lines[0].startswith("HloModule"):
        module_name = lines[0].split()[1].rstrip(",")
    tables: dict[str, dict[int, str]] = {}
    table = None
    computations: dict[str, Computation] = {}
    current: Computation | None = None
    entry = None
    for line in lines:
        stripped = line.strip()
        if current is None:
            if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
                table = tables.setdefault(stripped, {})
                continue
            m = _HEADER_RE.match(stripped)
            if m:
                current = Computation(m.group(2), is_entry=bool(m.group(1)))
                table = None
                continue
            if table is not None and stripped:
                key, _, value = stripped.partition(" ")
                if key.isdigit():
                    table[int(key)] = value
            continue
        if stripped == "}":
            computations[current.name] = current
            if current.is_entry:
                entry = current
            current = None
            continue
        if not stripped:
            continue
        inst = _parse_instruction(stripped)
        if inst is None:
            raise HloParseError(f"cannot read the instruction {stripped[:120]!r}")
        inst.computation = current.name
        current.instructions.append(inst)
        current.by_name[inst.name] = inst
    if entry is None:
        raise HloParseError("no ENTRY computation in the text: expected the output of compiled.as_text()")
    return Module(module_name, computations, entry, _stack_frames(tables))


# Debug information in program text: the tables of source locations in the module's header, and each
# instruction's ``metadata={op_name="jit(f)/dot_general" stack_frame_id=3}``.
_SOURCE_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_METADATA_RE = re.compile(r", metadata=\{")


def without_debug_info(text: str) -> str:
    """Program text without its debug information: each instruction's ``metadata={...}`` (the name of
    the operation that made it and the Python source it was traced from) and the module's tables of
    source locations (``FileNames``, ``FunctionNames``, ``FileLocations``, ``StackFrames``).

    Two compiles of one program can differ there alone: one read from JAX's persistent compilation
    cache carries the tables renumbered, and (the cache's key leaves debug information out) the
    metadata of whichever call compiled the program first. Compare programs through this.

    Example:
      >>> print(without_debug_info('''HloModule m
      ...
      ... FileNames
      ... 1 "model.py"
      ...
      ... ENTRY %main (p: f32[4]) -> f32[4] {
      ...   ROOT %p = f32[4]{0} parameter(0), metadata={op_name="f/{x}" stack_frame_id=1}
      ... }'''))
      HloModule m
      <BLANKLINE>
      ENTRY %main (p: f32[4]) -> f32[4] {
        ROOT %p = f32[4]{0} parameter(0)
      }
    """
    out: list[str] = []
    in_table = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in _SOURCE_TABLES:
            in_table = True
            continue
        if in_table:
            in_table = stripped.split(" ", 1)[0].isdigit()  # a row; a blank line ends the table
            if in_table or not stripped:
                continue
        while m := _METADATA_RE.search(line):
            line = line[: m.start()] + line[_balanced_end(line, m.end() - 1) :]
        out.append(line)
    return "\n".join(out)


def _stack_frames(tables: dict[str, dict[int, str]]) -> dict[int, SourceLocation]:
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    funcs = {k: v.strip('"') for k, v in tables.get("FunctionNames", {}).items()}
    locations = {}
    for k, v in tables.get("FileLocations", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", v))
        locations[k] = SourceLocation(
            files.get(int(fields.get("file_name_id", 0)), "?"),
            int(fields.get("line", 0)),
            funcs.get(int(fields.get("function_name_id", 0)), "?"),
        )
    frames = {}
    for k, v in tables.get("StackFrames", {}).items():
        m = re.search(r"file_location_id=(\d+)", v)
        if m and int(m.group(1)) in locations:
            frames[k] = locations[int(m.group(1))]
    return frames


# ---------------------------------------------------------------------------------------------------
# replica groups


def _iota(text: str) -> np.ndarray:
    """``[4,2]<=[8]`` or ``[2,4]<=[4,2]T(1,0)``: arange, reshape, transpose, reshape."""
    m = re.fullmatch(r"\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", text.strip())
    if not m:
        raise HloParseError(f"cannot read the iota device list {text!r}")
    shape = [int(d) for d in m.group(1).split(",")]
    reshape = [int(d) for d in m.group(2).split(",")]
    ids = np.arange(math.prod(reshape)).reshape(reshape)
    if m.group(3):
        ids = ids.transpose([int(d) for d in m.group(3).split(",")])
    return ids.reshape(shape)


_MESH_RE = re.compile(r"mesh\[([^\]]*)\](?:\s*,?\s*device_ids=(\S+?))?\s*\{([^}]*)\}")


def parse_mesh_groups(text: str) -> tuple[list[list[int]], dict[str, int], list[str]]:
    """``mesh['X'=2,'Y'=4] {'Y'}`` → (groups, mesh axis sizes, grouped axis names).

    Sub-axes (``'Y':(1)2``, a size-2 piece of Y after a prefix of size 1) are supported; the grouped
    axis name of a sub-axis is reported as the full axis.
    """
    m = _MESH_RE.search(text)
    if not m:
        raise HloParseError(f"cannot read the mesh replica groups {text!r}")
    axes = {}
    for part in m.group(1).split(","):
        name, _, size = part.strip().partition("=")
        axes[name.strip().strip("'\"")] = int(size)
    names, sizes = list(axes), list(axes.values())
    if m.group(2):
        device_text = m.group(2)
        ids = (
            _iota(device_text).reshape(-1)
            if "<=" in device_text
            else np.array([int(x) for x in re.findall(r"\d+", device_text)])
        )
    else:
        ids = np.arange(math.prod(sizes))
    # split every mesh axis into pieces so that each grouped (sub-)axis is one dimension
    grouped_refs = []
    for ref in _split_top(m.group(3)):
        ref = ref.strip()
        if not ref:
            continue
        sm = re.fullmatch(r"['\"]?([^'\":]+)['\"]?(?::\((\d+)\)(\d+))?", ref)
        if not sm:
            raise HloParseError(f"cannot read the mesh axis {ref!r} in {text!r}")
        pre, size = (int(sm.group(2)), int(sm.group(3))) if sm.group(2) else (1, axes[sm.group(1)])
        grouped_refs.append((sm.group(1), pre, size))
    dims: list[int] = []
    where: dict[tuple[str, int, int], int] = {}
    for name, full in zip(names, sizes, strict=True):
        cuts = sorted({1, full} | {p for n, p, s in grouped_refs if n == name}
                      | {p * s for n, p, s in grouped_refs if n == name})  # fmt: skip
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            for n, p, s in grouped_refs:
                if n == name and p == lo and p * s == hi:
                    where[(n, p, s)] = len(dims)
            dims.append(hi // lo)
        if full == 1:
            for n, p, s in grouped_refs:
                if n == name:
                    where[(n, p, s)] = len(dims)
            dims.append(1)
    grouped = [where[r] for r in grouped_refs]
    rest = [d for d in range(len(dims)) if d not in grouped]
    group_size = math.prod(dims[d] for d in grouped)
    table = ids.reshape(dims).transpose(rest + grouped).reshape(-1, group_size)
    return table.tolist(), axes, [r[0] for r in grouped_refs]


def parse_replica_groups(text: str | None) -> list[list[int]]:
    """The device groups of a collective, from any of the three spellings XLA prints.

    * explicit lists ``{{0,1},{2,3}}`` (``{}`` means one group of all devices: returned as ``[]``),
    * iota form ``[4,2]<=[8]`` and transposed ``[2,4]<=[4,2]T(1,0)``: the ids ``arange(8)`` reshaped to
      the right-hand shape, transposed, reshaped to [groups, group size],
    * mesh form ``mesh['X'=2,'Y'=4] {'Y'}``: groups along the named mesh axes.

    Example:
      >>> parse_replica_groups("[2,4]<=[4,2]T(1,0)")
      [[0, 2, 4, 6], [1, 3, 5, 7]]
    """
    if text is None:
        return []
    text = text.strip()
    if text.startswith("mesh"):
        return parse_mesh_groups(text)[0]
    if text.startswith("["):
        return _iota(text).tolist()
    if text.startswith("{"):
        inner = text[1:-1].strip()
        return [[int(x) for x in re.findall(r"-?\d+", g)] for g in re.findall(r"\{([^{}]*)\}", inner)]
    raise HloParseError(f"cannot read replica_groups={text!r}")


def parse_pairs(text: str | None) -> list[tuple[int, int]]:
    """``source_target_pairs={{0,3},{1,0}}`` → [(0, 3), (1, 0)]."""
    if not text:
        return []
    return [(int(a), int(b)) for a, b in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", text)]


def replica_groups_text(inst: Instruction) -> str | None:
    """The replica_groups attribute of ``inst``; the mesh form contains a space, so it is re-joined."""
    text = inst.attrs_text
    i = text.find("replica_groups=")
    if i < 0:
        return None
    start = i + len("replica_groups=")
    if text.startswith("mesh", start):
        m = _MESH_RE.match(text, start)
        if not m:
            raise HloParseError(f"cannot read replica_groups in {text[start : start + 120]!r}")
        return m.group(0)
    if text[start] == "{":
        return text[start : _balanced_end(text, start)]
    m = re.compile(r"\[[0-9,]+\]<=\[[0-9,]+\](?:T\([0-9,]+\))?").match(text, start)
    if not m:
        raise HloParseError(f"cannot read replica_groups in {text[start : start + 120]!r}")
    return m.group(0)
