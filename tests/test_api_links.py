"""tools/api_links.py: API names in prose link to their reference pages (the table, the extension, the
check of the table against the documentation's sources)."""

import re
from html.parser import HTMLParser

import nbformat
import pytest
import yaml

from tests.notebooks import ROOT, sphinx_page
from tools import api_links


def test_every_link_is_a_name_of_its_package_with_a_url_of_that_packages_reference():
    # A well-formed dotted name, and a URL of the shape its documentation's sources generate.
    for name, url in api_links.LINKS.items():
        assert re.fullmatch(r"[a-z]\w*(\.\w+)+", name), f"{name!r} is not a dotted API name"
        package = name.split(".")[0]
        assert package in api_links.SITES, f"{name}: no reference site for {package!r}"
        root, shape = api_links.SITES[package]
        assert url.startswith(root), f"{name}: {url} is not under {root}"
        assert shape.fullmatch(url[len(root) :]), f"{name}: {url} is not a URL of {root}'s reference"


def test_a_links_page_or_anchor_ends_with_the_names_last_part():
    # The page or anchor names the same object: a copied line with one name changed is caught here.
    for name, url in api_links.LINKS.items():
        page = url.removesuffix("/index.html").rsplit("/", 1)[1].removesuffix(".html")  # a folder's index
        target = url.split("#")[1] if "#" in url else page
        last = name.split(".")[-1]
        assert target.split(".")[-1] == last or target == name, f"{name} -> {url}"


def test_the_abbreviations_resolve_to_names_of_the_table():
    # Every bare name stands for a linked API; abbreviations expand to a package the table links.
    for bare, full in api_links.BARE.items():
        assert full in api_links.LINKS, f"{bare} stands for {full}, which has no link"
    for full in api_links.PREFIXES.values():
        assert any(name.startswith(full) for name in api_links.LINKS), full


@pytest.mark.parametrize(
    "text, name",
    [
        ("jax.jit", "jax.jit"),
        ("jax.jit(f)", "jax.jit"),
        ("jax.shard_map(f, mesh=..., in_specs=..., out_specs=...)", "jax.shard_map"),
        ("lax.psum(x, 'X')", "jax.lax.psum"),
        ("jnp.dot", "jax.numpy.dot"),
        ("nnx.split", "flax.nnx.split"),
        ("shard_map", "jax.shard_map"),
        ("psum", "jax.lax.psum"),
        ("NamedSharding(mesh, P(...))", "jax.sharding.NamedSharding"),
    ],
)
def test_a_name_or_one_call_of_it_links(text, name):
    assert api_links.api_link(text) == (name, api_links.LINKS[name])


@pytest.mark.parametrize(
    "text",
    [
        "jax.jit(f).lower(*args).compile().as_text()",  # a chain: about the result, not jax.jit
        "jax.reshard(h, P('X', None)) @ w_out",  # an expression
        "jax.reshard",  # no reference page in the JAX docs
        "jax.lax.pcast",
        "jax.",
        "P('X', 'Y')",
        "x_block",
        "all-gather",  # the compiled program's op, not the function
        "dot_general",  # the chapters also name the compiled program's op so
    ],
)
def test_other_literals_do_not_link(text):
    assert api_links.api_link(text) is None


def test_reference_pages_reads_autosummary_autodoc_and_flax_modules(tmp_path):
    # What a Sphinx docs folder generates: autosummary pages, autodoc anchors, a module's anchor.
    (tmp_path / "api").mkdir()
    (tmp_path / "jax.lax.rst").write_text(
        "``jax.lax``\n==========\n\n.. automodule:: jax.lax\n\n.. autosummary::\n  :toctree: _autosummary\n\n"
        "    psum\n    ~ppermute\n\nClasses\n-------\n\n.. currentmodule:: jax.lax\n\n"
        ".. autoclass:: Precision\n   :members:\n\n.. automodule:: jax.lax.linalg\n\n"
        ".. autosummary::\n  :toctree: _autosummary\n\n    qr\n"
    )
    (tmp_path / "api" / "opt.rst").write_text(
        ".. currentmodule:: optax\n\n.. autosummary::\n    :toctree: generated/\n\n    adam\n\n"
        ".. autosummary::\n\n    sgd\n\n.. flax_module::\n  :module: flax.nnx\n  :class: Linear\n"
    )
    (tmp_path / "_autosummary").mkdir()
    (tmp_path / "_autosummary" / "jax.lax.psum.rst").write_text(".. autofunction:: jax.lax.psum\n")
    names, pages = api_links.reference_pages(tmp_path, "https://x/")
    assert names == {
        "jax.lax": "https://x/jax.lax.html#module-jax.lax",
        "jax.lax.psum": "https://x/_autosummary/jax.lax.psum.html",
        "jax.lax.ppermute": "https://x/_autosummary/jax.lax.ppermute.html",
        "jax.lax.Precision": "https://x/jax.lax.html#jax.lax.Precision",
        "jax.lax.linalg": "https://x/jax.lax.html#module-jax.lax.linalg",
        "jax.lax.linalg.qr": "https://x/_autosummary/jax.lax.linalg.qr.html",
        "optax.adam": "https://x/api/generated/optax.adam.html",  # sgd: no :toctree:, no page
        "flax.nnx.Linear": "https://x/api/opt.html#flax.nnx.Linear",
    }
    assert sorted(pages) == ["https://x/api/opt.html", "https://x/jax.lax.html"]  # generated ones left out


def test_verify_fails_on_a_url_the_sources_do_not_make_and_on_another_object(tmp_path, monkeypatch, capsys):
    # An alias passes only when importing both names gives one object.
    (tmp_path / "jax.rst").write_text(
        ".. currentmodule:: jax\n\n.. autosummary::\n  :toctree: _autosummary\n\n    jit\n    vmap\n"
    )
    (tmp_path / "ch.md").write_text("Prose: `jax.vmap(f)` and `jax.nothing`.\n\n```python\njax.jit\n```\n")
    jit = api_links.JAX + "_autosummary/jax.jit.html"
    monkeypatch.setattr(
        api_links,
        "LINKS",
        {"jax.jit": jit, "jax.pjit": api_links.JAX + "_autosummary/jax.pjit.html", "jax.grad": jit},
    )
    problems = api_links.verify({"jax": tmp_path}, [tmp_path / "ch.md"])
    assert problems == [
        f"jax.grad: {jit} documents ['jax.jit'], another object",
        f"jax.pjit: the sources make no {api_links.JAX}_autosummary/jax.pjit.html (documented at None)",
    ]
    printed = capsys.readouterr().out
    assert f'"jax.vmap": {api_links.JAX + "_autosummary/jax.vmap.html"!r},  # ch' in printed
    assert "without a page in these sources: jax.nothing (ch)" in printed
    assert api_links._same_object("jax.new_ref", "jax.ref.new_ref")


def test_the_book_loads_the_extension():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert "tools.api_links" in config["local_extensions"]
    assert "tools.api_links" in config["config"]["extensions"]


class _Links(HTMLParser):
    """(href, text) of each <a>, and the text of each <code> outside one, per section id."""

    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str, str]] = []
        self.codes: list[str] = []
        self._section = ""
        self._href: str | None = None
        self._in_pre = 0
        self._text = ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self._section = attrs.get("id", "")
        if tag == "a" and "api-link" in (attrs.get("class") or ""):
            self._href, self._text = attrs["href"], ""
        if tag == "pre":
            self._in_pre += 1

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._section, self._href, self._text))
            self._href = None
        if tag == "pre":
            self._in_pre -= 1

    def handle_data(self, data):
        if self._href is not None:
            self._text += data
        if self._in_pre:
            self.codes.append(data)


def test_a_misspelt_api_name_is_reported_and_the_books_prose_has_none():
    # What the build warns about (and -W turns into a failure): a name under jax./flax./optax./orbax.
    # that the installed packages do not have, unless REMOVED says why the book writes it.
    assert api_links.unknown_name("jax.lax.psun(x, 'X')") == "jax.lax.psun"
    assert api_links.unknown_name("jnp.zeroes") == "jax.numpy.zeroes"
    assert api_links.unknown_name("optax.adamm") == "optax.adamm"
    for fine in ("jax.lax.psum", "lax.psum(x, 'X')", "jax.sharding.NamedSharding", "np.sum", "psum"):
        assert api_links.unknown_name(fine) is None, fine
    assert all(api_links.unknown_name(name) is None for name in api_links.REMOVED)
    sources = sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "solutions").glob("*/*.md"))
    unknown = {n: where for n, where in api_links.prose_names(sources).items() if api_links.unknown_name(n)}
    assert not unknown, unknown
    for name in api_links.REMOVED:  # each entry is still needed
        with pytest.raises((ImportError, AttributeError)):
            api_links._object(name)


def test_a_built_page_links_names_in_prose_once_per_section_and_leaves_code_alone(tmp_path):
    # A tiny Sphinx build with myst-nb (no execution: the notebook's stored outputs are shown).
    cells = [
        nbformat.v4.new_markdown_cell(
            "# A page\n\n## First\n\nWe call `jax.jit(f)` and `jnp.dot`, then `jax.jit` again,"
            " and `jax.reshard`; `jax.lax.psun` is a typo."
        ),
        nbformat.v4.new_code_cell(
            "jax.jit(f)",
            outputs=[
                nbformat.v4.new_output("stream", name="stdout", text="`jax.jit`\n"),
                nbformat.v4.new_output("display_data", data={"text/markdown": "An output: `jax.vjp`"}),
            ],
        ),
        nbformat.v4.new_markdown_cell(
            "## Second\n\n:::{note}\nAgain `jax.jit`.\n:::\n\n### `jax.vjp` in a title"
        ),
    ]
    html, said = sphinx_page(tmp_path, cells, "tools.api_links", "myst_enable_extensions = ['colon_fence']\n")
    assert "page.ipynb" in said and "names jax.lax.psun, which the installed packages do not have" in said
    page = _Links()
    page.feed(html)
    jit, dot = api_links.LINKS["jax.jit"], api_links.LINKS["jax.numpy.dot"]
    assert page.links == [("first", jit, "jax.jit(f)"), ("first", dot, "jnp.dot"), ("second", jit, "jax.jit")]
    assert "jax.jit(f)" in "".join(page.codes)  # the code cell is still there, not linked
    assert 'title="jax.jit"' in html  # the full name shows on hover
    assert "An output: <code" in html and api_links.LINKS["jax.vjp"] not in html  # output, title: no link
