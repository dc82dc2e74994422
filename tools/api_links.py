"""Sphinx extension: an API name in a page's prose links to its reference page, as the JAX docs do.

`LINKS` below is the one table of API name -> reference URL (JAX, Flax NNX, Optax). The book builds
offline, so there is no intersphinx download: every URL was checked against the documentation's own
sources (the `.rst` files whose autosummary and autodoc directives make the reference pages), with

    python tools/api_links.py verify --jax JAX/docs --flax FLAX/docs_nnx --optax OPTAX/docs

(JAX/, FLAX/, OPTAX/: checkouts of jax-ml/jax, google/flax, google-deepmind/optax). It fails on an
entry whose URL those sources do not make, or whose name is not the documented object (an alias is
checked by importing both), and prints, ready to paste, the names the chapters' prose writes in inline
code that the sources document but the table lacks.

In the build, an inline literal of prose (a Markdown cell, not a code cell or its output, not a
heading, not already a link) links when its text is a name of the table, or a call of one
(`jax.lax.psum(x, 'X')`, `jax.jit(f)`; not `jax.jit(f).lower(...)`). The chapters' abbreviations
resolve first: `jnp.` `lax.` `nnx.` (PREFIXES) and the bare names the chapters use for one API
(BARE: `shard_map`, `psum`, `jit` …). A name links at its first occurrence in each section, the
smallest one around it: a reader who jumps to a section from "On this page" finds the link there, and
a paragraph that says `jax.jit` four times is not underlined four times. The link's title is the full name.

A name of prose under `jax.`, `flax.`, `optax.` or `orbax.` (after the abbreviations) that the installed
packages do not have is a build warning, so `-W` fails the build on a misspelt API name; a name the book
mentions because JAX removed it is listed in REMOVED with its reason.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import re
import sys
import warnings
from pathlib import Path

from docutils import nodes  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[1]

JAX = "https://docs.jax.dev/en/latest/"
FLAX = "https://flax.readthedocs.io/en/latest/"  # Flax NNX (Linen moved to flax-linen.readthedocs.io)
OPTAX = "https://optax.readthedocs.io/en/latest/"
# A package's reference, and the shapes its pages' URLs take (what the verified sources generate):
# autosummary pages (one per name), autodoc anchors on a page, a module's own page.
SITES: dict[str, tuple[str, re.Pattern[str]]] = {
    "jax": (JAX, re.compile(r"_autosummary/jax(\.\w+)+\.html|jax(\.\w+)*\.html(#jax(\.\w+)+)?")),
    "flax": (FLAX, re.compile(r"api_reference/flax\.nnx/(\w+/)*\w+\.html(#flax\.nnx(\.\w+)+)?")),
    "optax": (OPTAX, re.compile(r"api/generated/optax(\.\w+)+\.html")),
}

# How the chapters abbreviate: `import jax.numpy as jnp`, `from jax import lax`, `from flax import nnx`.
PREFIXES = {"jnp.": "jax.numpy.", "lax.": "jax.lax.", "nnx.": "flax.nnx."}
# Bare names that mean one API wherever the book writes them (not `dot_general`, which the chapters
# also write for the compiled program's op, nor `value_and_grad`: JAX's or NNX's).
BARE = {
    "shard_map": "jax.shard_map",
    "jit": "jax.jit",
    "pmap": "jax.pmap",
    "grad": "jax.grad",
    "vmap": "jax.vmap",
    "custom_vjp": "jax.custom_vjp",
    "NamedSharding": "jax.sharding.NamedSharding",
    "PartitionSpec": "jax.sharding.PartitionSpec",
    "psum": "jax.lax.psum",
    "pmean": "jax.lax.pmean",
    "ppermute": "jax.lax.ppermute",
    "all_gather": "jax.lax.all_gather",
    "psum_scatter": "jax.lax.psum_scatter",
    "all_to_all": "jax.lax.all_to_all",
    "ragged_all_to_all": "jax.lax.ragged_all_to_all",
    "axis_index": "jax.lax.axis_index",
    "axis_size": "jax.lax.axis_size",
    "with_sharding_constraint": "jax.lax.with_sharding_constraint",
}

# API name -> reference URL. Add a name with its URL as `verify` prints it, then run `verify`.
LINKS: dict[str, str] = {
    # jax (docs/jax.rst)
    "jax.Array": JAX + "_autosummary/jax.Array.html",
    "jax.CompilerEffortLevel": JAX + "_autosummary/jax.CompilerEffortLevel.html",
    "jax.ShapeDtypeStruct": JAX + "_autosummary/jax.ShapeDtypeStruct.html",
    "jax.checkpoint": JAX + "_autosummary/jax.checkpoint.html",
    "jax.custom_vjp": JAX + "_autosummary/jax.custom_vjp.html",
    "jax.default_matmul_precision": JAX + "_autosummary/jax.default_matmul_precision.html",
    "jax.device_put": JAX + "_autosummary/jax.device_put.html",
    "jax.devices": JAX + "_autosummary/jax.devices.html",
    "jax.eval_shape": JAX + "_autosummary/jax.eval_shape.html",
    "jax.fwd_and_bwd": JAX + "_autosummary/jax.fwd_and_bwd.html",
    "jax.grad": JAX + "_autosummary/jax.grad.html",
    "jax.jit": JAX + "_autosummary/jax.jit.html",
    "jax.local_devices": JAX + "_autosummary/jax.local_devices.html",
    "jax.make_array_from_process_local_data": JAX
    + "_autosummary/jax.make_array_from_process_local_data.html",
    "jax.make_mesh": JAX + "_autosummary/jax.make_mesh.html",
    "jax.pmap": JAX + "_autosummary/jax.pmap.html",
    "jax.set_mesh": JAX + "_autosummary/jax.set_mesh.html",
    "jax.shard_map": JAX + "_autosummary/jax.shard_map.html",
    "jax.typeof": JAX + "_autosummary/jax.typeof.html",
    "jax.value_and_grad": JAX + "_autosummary/jax.value_and_grad.html",
    "jax.vjp": JAX + "_autosummary/jax.vjp.html",
    "jax.vmap": JAX + "_autosummary/jax.vmap.html",
    # jax.lax (docs/jax.lax.rst)
    "jax.lax.DotAlgorithmPreset": JAX + "jax.lax.html#jax.lax.DotAlgorithmPreset",
    "jax.lax.all_gather": JAX + "_autosummary/jax.lax.all_gather.html",
    "jax.lax.all_to_all": JAX + "_autosummary/jax.lax.all_to_all.html",
    "jax.lax.axis_index": JAX + "_autosummary/jax.lax.axis_index.html",
    "jax.lax.axis_size": JAX + "_autosummary/jax.lax.axis_size.html",
    "jax.lax.dot_general": JAX + "_autosummary/jax.lax.dot_general.html",
    "jax.lax.pmean": JAX + "_autosummary/jax.lax.pmean.html",
    "jax.lax.ppermute": JAX + "_autosummary/jax.lax.ppermute.html",
    "jax.lax.psum": JAX + "_autosummary/jax.lax.psum.html",
    "jax.lax.psum_scatter": JAX + "_autosummary/jax.lax.psum_scatter.html",
    "jax.lax.ragged_all_to_all": JAX + "_autosummary/jax.lax.ragged_all_to_all.html",
    "jax.lax.ragged_dot": JAX + "_autosummary/jax.lax.ragged_dot.html",
    "jax.lax.scan": JAX + "_autosummary/jax.lax.scan.html",
    "jax.lax.switch": JAX + "_autosummary/jax.lax.switch.html",
    "jax.lax.with_sharding_constraint": JAX + "_autosummary/jax.lax.with_sharding_constraint.html",
    # jax.numpy (docs/jax.numpy.rst)
    "jax.numpy.arange": JAX + "_autosummary/jax.numpy.arange.html",
    "jax.numpy.argsort": JAX + "_autosummary/jax.numpy.argsort.html",
    "jax.numpy.bincount": JAX + "_autosummary/jax.numpy.bincount.html",
    "jax.numpy.dot": JAX + "_autosummary/jax.numpy.dot.html",
    "jax.numpy.einsum": JAX + "_autosummary/jax.numpy.einsum.html",
    "jax.numpy.matmul": JAX + "_autosummary/jax.numpy.matmul.html",
    "jax.numpy.roll": JAX + "_autosummary/jax.numpy.roll.html",
    "jax.numpy.sin": JAX + "_autosummary/jax.numpy.sin.html",
    "jax.numpy.where": JAX + "_autosummary/jax.numpy.where.html",
    "jax.numpy.zeros": JAX + "_autosummary/jax.numpy.zeros.html",
    "jax.numpy.zeros_like": JAX + "_autosummary/jax.numpy.zeros_like.html",
    # jax.sharding, jax.distributed, jax.random, jax.ref, jax.tree, jax.experimental (their .rst)
    "jax.sharding": JAX + "jax.sharding.html",
    "jax.sharding.Mesh": JAX + "jax.sharding.html#jax.sharding.Mesh",
    "jax.sharding.NamedSharding": JAX + "jax.sharding.html#jax.sharding.NamedSharding",
    "jax.sharding.PartitionSpec": JAX + "jax.sharding.html#jax.sharding.PartitionSpec",
    "jax.distributed.initialize": JAX + "_autosummary/jax.distributed.initialize.html",
    "jax.random.normal": JAX + "_autosummary/jax.random.normal.html",
    "jax.random.split": JAX + "_autosummary/jax.random.split.html",
    "jax.ref.Ref": JAX + "_autosummary/jax.ref.Ref.html",
    "jax.Ref": JAX + "_autosummary/jax.ref.Ref.html",  # the same class (verify imports both)
    "jax.ref.new_ref": JAX + "_autosummary/jax.ref.new_ref.html",
    "jax.new_ref": JAX + "_autosummary/jax.ref.new_ref.html",  # the same function
    "jax.tree.leaves": JAX + "_autosummary/jax.tree.leaves.html",
    "jax.tree.leaves_with_path": JAX + "_autosummary/jax.tree.leaves_with_path.html",
    "jax.tree.map": JAX + "_autosummary/jax.tree.map.html",
    "jax.experimental.pallas.tpu.ChipVersion": JAX
    + "_autosummary/jax.experimental.pallas.tpu.ChipVersion.html",
    "jax.experimental.xla_metadata": JAX + "jax.experimental.xla_metadata.html",
    # flax.nnx (docs_nnx/api_reference/flax.nnx/)
    "flax.nnx": FLAX + "api_reference/flax.nnx/index.html",
    "flax.nnx.Linear": FLAX + "api_reference/flax.nnx/nn/linear.html#flax.nnx.Linear",
    "flax.nnx.Module": FLAX + "api_reference/flax.nnx/module.html#flax.nnx.Module",
    "flax.nnx.Optimizer": FLAX
    + "api_reference/flax.nnx/training/optimizer.html#flax.nnx.optimizer.Optimizer",
    "flax.nnx.Rngs": FLAX + "api_reference/flax.nnx/rnglib.html#flax.nnx.Rngs",
    "flax.nnx.display": FLAX + "api_reference/flax.nnx/visualization.html#flax.nnx.display",
    "flax.nnx.graphdef": FLAX + "api_reference/flax.nnx/graph.html#flax.nnx.graphdef",
    "flax.nnx.jit": FLAX + "api_reference/flax.nnx/transforms.html#flax.nnx.jit",
    "flax.nnx.merge": FLAX + "api_reference/flax.nnx/graph.html#flax.nnx.merge",
    "flax.nnx.split": FLAX + "api_reference/flax.nnx/graph.html#flax.nnx.split",
    "flax.nnx.state": FLAX + "api_reference/flax.nnx/graph.html#flax.nnx.state",
    "flax.nnx.value_and_grad": FLAX + "api_reference/flax.nnx/transforms.html#flax.nnx.value_and_grad",
    # optax (docs/api/)
    "optax.adam": OPTAX + "api/generated/optax.adam.html",
    "optax.adamw": OPTAX + "api/generated/optax.adamw.html",
    "optax.apply_updates": OPTAX + "api/generated/optax.apply_updates.html",
    "optax.sgd": OPTAX + "api/generated/optax.sgd.html",
    "optax.tree_map_params": OPTAX + "api/generated/optax.tree_utils.tree_map_params.html",  # alias
}

#: Names the prose writes that the installed packages do not have, on purpose: name -> why.
REMOVED = {
    "jax.device_put_replicated": "chapter 0 shows old code and the AttributeError JAX 0.12 gives for it",
    "jax.lax.pvary": "chapters 1 and 4 name the old spelling of jax.lax.pcast(..., to='varying')",
}
#: The packages whose names are checked against what they export.
CHECKED = re.compile(r"(jax|flax|optax|orbax)\.\w")


# An inline literal that is a name, or one call of a name: `jax.jit`, `jax.lax.psum(x, 'X')`.
_CALL = re.compile(r"(?P<name>[A-Za-z_]\w*(?:\.\w+)*)(?:\((?P<args>.*)\))?", re.S)


def _balanced(args: str) -> bool:
    depth = 0
    for char in args:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def canonical_name(text: str) -> str:
    """The full name an inline literal speaks of: abbreviations expanded, a call's arguments dropped.

    >>> canonical_name("lax.psum(x, 'X')")
    'jax.lax.psum'
    >>> canonical_name("jax.jit(f).lower(x)")
    ''
    """
    match = _CALL.fullmatch(text.strip())
    if match is None or (match["args"] is not None and not _balanced(match["args"])):
        return ""
    name = BARE.get(match["name"], match["name"])
    for short, full in PREFIXES.items():
        if name.startswith(short):
            return full + name[len(short) :]
    return name


def unknown_name(text: str) -> str | None:
    """The full name an inline literal writes when it is under a checked package but names nothing the
    installed package has (a misspelling, or an API that moved), unless REMOVED lists it; else None.

    >>> unknown_name("jax.lax.psun(x, 'X')"), unknown_name("lax.psum"), unknown_name("np.sum")
    ('jax.lax.psun', None, None)
    """
    name = canonical_name(text)
    if not CHECKED.match(name) or name in REMOVED:
        return None
    try:
        with warnings.catch_warnings():  # a deprecated module the prose names on purpose still exists
            warnings.simplefilter("ignore")
            _object(name)
    except (ImportError, AttributeError):
        return name
    return None


def api_link(text: str) -> tuple[str, str] | None:
    """(full name, URL) when an inline literal's text is a name of LINKS or one call of it."""
    name = canonical_name(text)
    return (name, LINKS[name]) if name in LINKS else None


# The Sphinx extension.


# A literal inside one of these is not prose: a link already, a heading, a caption, raw or preformatted.
_NOT_PROSE = (nodes.reference, nodes.title, nodes.caption, nodes.raw, nodes.FixedTextElement)


def _in_prose(node: nodes.Node) -> bool:
    """Not in a code cell or its output, a heading, a link or a caption."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, _NOT_PROSE):
            return False
        if isinstance(parent, nodes.Element) and str(parent.get("nb_element", "")).startswith("cell_code"):
            return False
        parent = parent.parent
    return True


def link_api_names(document: nodes.document, warn=None) -> int:
    """Wrap each inline literal of prose naming a known API in a link, once per section; how many.

    ``warn(message, node)`` is called for each literal of prose that names nothing the installed
    packages have (:func:`unknown_name`)."""
    seen: set[tuple[int, str]] = set()
    linked = 0
    for literal in list(document.findall(nodes.literal)):
        if not _in_prose(literal):
            continue
        unknown = unknown_name(literal.astext())
        if unknown is not None and warn is not None:
            warn(
                f"`{literal.astext()}` names {unknown}, which the installed packages do not have "
                "(misspelt? else list it in tools/api_links.py REMOVED with its reason)",
                literal,
            )
        found = api_link(literal.astext())
        if found is None:
            continue
        name, url = found
        section = literal.parent
        while section is not None and not isinstance(section, (nodes.section, nodes.document)):
            section = section.parent
        key = (id(section), name)
        if key in seen:
            continue
        seen.add(key)
        reference = nodes.reference("", "", refuri=url, reftitle=name, internal=False)
        reference["classes"].append("api-link")
        literal.replace_self(reference)
        reference += literal
        linked += 1
    return linked


def table_version() -> int:
    """Changes with the table, so that Sphinx reads every page again when a link is added."""
    tables = (LINKS, PREFIXES, BARE, REMOVED)
    text = "".join(repr(sorted(table.items())) for table in tables)
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def setup(app):
    from sphinx.transforms import SphinxTransform
    from sphinx.util import logging

    class LinkApiNames(SphinxTransform):
        default_priority = 700

        def apply(self, **kwargs) -> None:
            log = logging.getLogger(__name__)
            link_api_names(self.document, lambda message, node: log.warning(message, location=node))

    app.add_transform(LinkApiNames)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": table_version()}


# Checking the table against the documentation's sources.

_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\. (?P<kind>[\w:-]+)::[ \t]*(?P<arg>.*)$")
_AUTODOC = {"autofunction", "autoclass", "autodata", "autoexception", "autoattribute", "automethod"}


def _qualify(name: str, module: str | None) -> str:
    name = name.strip().lstrip("~")
    if module is None or name.split(".")[0] == module.split(".")[0]:
        return name
    return f"{module}.{name}"


def reference_pages(docs: Path, root_url: str) -> tuple[dict[str, str], dict[str, str]]:
    """What a Sphinx documentation's .rst sources make: ({documented name: URL}, {page URL: text}).

    autosummary entries with a :toctree: get a page each (<toctree>/<module>.<name>.html); autodoc
    directives an anchor on their page (<page>.html#<module>.<name>); currentmodule, module and
    automodule set the module the names after them belong to; Flax's flax_module directive is an
    autoclass.
    """
    names: dict[str, str] = {}
    pages: dict[str, str] = {}
    for rst in sorted(docs.rglob("*.rst")):
        relative = rst.relative_to(docs)
        if any(part.startswith(("_", ".")) or part == "generated" for part in relative.parts):
            continue  # generated pages and templates
        page = relative.with_suffix(".html").as_posix()
        text = rst.read_text(errors="replace")
        pages[root_url + page] = text
        lines = text.splitlines()
        module: str | None = None
        i = 0
        while i < len(lines):
            match = _DIRECTIVE.match(lines[i])
            i += 1
            if match is None:
                continue
            kind, arg, indent = match["kind"].removeprefix("py:"), match["arg"].strip(), match["indent"]
            if kind in ("currentmodule", "module"):
                module = None if arg in ("", "None") else arg
            elif kind == "automodule":
                module = arg
                names.setdefault(arg, f"{root_url}{page}#module-{arg}")
            elif kind in _AUTODOC:
                full = _qualify(arg, module)
                names.setdefault(full, f"{root_url}{page}#{full}")
            elif kind == "flax_module":  # Flax's directive: an autoclass of :module:.:class:
                options = dict(re.findall(r"^\s+:(\w+):\s*(\S+)", "\n".join(lines[i : i + 2]), re.M))
                full = f"{options.get('module')}.{options.get('class')}"
                names.setdefault(full, f"{root_url}{page}#{full}")
            elif kind == "autosummary":
                toctree, entries = None, []
                while i < len(lines) and (
                    not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)
                ):
                    line = lines[i].strip()
                    i += 1
                    if line.startswith(":toctree:"):
                        toctree = line.removeprefix(":toctree:").strip()
                    elif line and not line.startswith((":", "..")):
                        entries.append(_qualify(line.split()[0], module))
                if toctree:
                    folder = (relative.parent / toctree).as_posix().removeprefix("./")
                    for full in entries:
                        names.setdefault(full, f"{root_url}{folder}/{full}.html")
    return names, pages


def _object(name: str):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(name)


def _same_object(name: str, documented: str) -> bool:
    try:
        return _object(name) is _object(documented)
    except (ImportError, AttributeError):
        return False


def prose_names(sources: list[Path]) -> dict[str, list[str]]:
    """Full names the Markdown cells of `sources` write in inline code: {name: [chapter, ...]}."""
    found: dict[str, list[str]] = {}
    for source in sources:
        text = re.sub(r"^(`{3,}|~{3,}).*?^\1", "", source.read_text(), flags=re.S | re.M)  # fenced cells
        for literal in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text):
            name = canonical_name(literal)
            if re.match(r"(jax|flax|optax|orbax)\.\w", name) and source.stem not in found.get(name, []):
                found.setdefault(name, []).append(source.stem)
    return found


def verify(docs: dict[str, Path], sources: list[Path]) -> list[str]:
    """Problems of LINKS against the docs' sources; prints the names the chapters could link."""
    problems: list[str] = []
    documented: dict[str, str] = {}
    pages: dict[str, str] = {}
    for package, folder in docs.items():
        names, texts = reference_pages(folder, SITES[package][0])
        documented.update((n, u) for n, u in names.items() if n.split(".")[0] == package)
        pages.update(texts)
    by_url: dict[str, list[str]] = {}
    for name, url in documented.items():
        by_url.setdefault(url, []).append(name)
    for name, url in sorted(LINKS.items()):
        package = name.split(".")[0]
        if package not in docs:
            problems.append(f"{name}: no --{package} sources given to check {url}")
        elif url in by_url:
            if name not in by_url[url] and not any(_same_object(name, d) for d in by_url[url]):
                problems.append(f"{name}: {url} documents {by_url[url]}, another object")
        elif url in pages:
            if name not in pages[url][:300]:
                problems.append(f"{name}: the page {url} does not open with that name")
        else:
            problems.append(f"{name}: the sources make no {url} (documented at {documented.get(name)})")
    unknown = []
    for name, chapters in sorted(prose_names(sources).items()):
        if name in LINKS:
            continue
        if name in documented:
            print(f'    "{name}": {documented[name]!r},  # {", ".join(chapters)}')
        else:
            unknown.append(f"{name} ({', '.join(chapters)})")
    if unknown:
        print("in the chapters' prose without a page in these sources:", "; ".join(unknown))
    return problems


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("verify", help="check LINKS against the docs' .rst sources")
    for package in SITES:
        check.add_argument(f"--{package}", type=Path, help=f"the docs folder of a {package} checkout")
    args = parser.parse_args(argv)
    docs = {p: getattr(args, p) for p in SITES if getattr(args, p) is not None}
    problems = verify(docs, sorted((ROOT / "book").glob("*.md")))
    for problem in problems:
        print("✗", problem)
    checked = sum(name.split(".")[0] in docs for name in LINKS)
    print(f"{checked} of {len(LINKS)} links checked against the sources, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
