"""Each chapter executed once: the outputs of `tools/notebooks.py run` are the ones the book shows.

The book is built with myst-nb's `execute_notebooks: cache`: a page whose code cells match a notebook
in the jupyter-cache (_build/.jupyter_cache) is rendered from that notebook's outputs, and a page the
cache lacks is executed by the build and added to it. `tools/notebooks.py run` executes the chapters
with papermill and puts its results into the same cache, so `make notebooks` then `make book` executes
each chapter once, and `make book` alone on a fresh clone still executes everything.

jupyter-cache keys a notebook on its code cells only; what the cells import is not in the key. This
module adds it: `dependency_key()` hashes the helper package and the pins, the cache is emptied when
that hash changes (`open_cache`), and, as a Sphinx extension (`_config.yml`, local_extensions), the
build re-reads every notebook page whose doctree was made with another hash. It also writes the
executed notebook of a page served from the cache to _build/jupyter_execute/ (myst-nb 1.4 writes the
unexecuted one there on a cache hit), where tools/site_check.py reads it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What every chapter imports or is installed from: a change to any of these re-executes every chapter.
DEPENDENCIES = ("shardbook", "requirements.txt", "pyproject.toml")
# myst-nb's default place when _config.yml names none: beside the html folder.
CACHE = ROOT / "_build" / ".jupyter_cache"
STAMP = "dependencies.sha256"
ENV_ATTRIBUTE = "shardbook_dependency_key"


def dependency_key(root: Path = ROOT) -> str:
    """A hash of the files under DEPENDENCIES (paths and contents; compiled files left out)."""
    digest = hashlib.sha256()
    for name in DEPENDENCIES:
        top = root / name
        files = sorted(top.rglob("*")) if top.is_dir() else [top]
        for path in files:
            if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def open_cache(path: Path = CACHE, key: str | None = None):
    """The jupyter-cache at `path`, emptied first when it was filled with other dependencies."""
    from jupyter_cache import get_cache

    key = key or dependency_key()
    path = Path(path)
    stamp = path / STAMP
    if path.exists() and (not stamp.exists() or stamp.read_text().strip() != key):
        get_cache(path).clear_cache()
    path.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key + "\n")
    return get_cache(path)


def cached_outputs(cache, nb):
    """`nb` with the outputs of its match in `cache`, or None when the cache has no match."""
    try:
        return cache.merge_match_into_notebook(nb)[1]
    except KeyError:
        return None


# The Sphinx extension.


def _uses_cache(app) -> bool:
    return app.env.mystnb_config.execution_mode == "cache"


def _builder_inited(app) -> None:
    app.env.shardbook_dependency_key_now = dependency_key()
    if _uses_cache(app):
        open_cache(Path(app.env.mystnb_config.execution_cache_path), app.env.shardbook_dependency_key_now)


def _env_get_outdated(app, env, added, changed, removed) -> list[str]:
    """Notebook pages read with other dependencies than now are read again (and so looked up again)."""
    before = getattr(env, ENV_ATTRIBUTE, None)
    if before is None or before == env.shardbook_dependency_key_now:
        return []
    return sorted(d for d in env.found_docs if d not in added and "kernelspec" in env.metadata.get(d, {}))


def _doctree_read(app, doctree) -> None:
    """Puts the cached outputs into _build/jupyter_execute/<page>.ipynb when myst-nb left them out."""
    if not _uses_cache(app):
        return
    import nbformat

    written = Path(app.env.mystnb_config.output_folder) / (app.env.docname + ".ipynb")
    if not written.exists():
        return
    nb = nbformat.read(written, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code or any(c.get("outputs") or c.get("execution_count") for c in code):
        return
    from jupyter_cache import get_cache

    executed = cached_outputs(get_cache(app.env.mystnb_config.execution_cache_path), nb)
    if executed is not None:
        nbformat.write(executed, written)


def _env_updated(app, env) -> list[str]:
    setattr(env, ENV_ATTRIBUTE, env.shardbook_dependency_key_now)
    return []


def setup(app):
    # After myst-nb's own builder-inited handler, which settles the cache and output folders.
    app.connect("builder-inited", _builder_inited, priority=900)
    app.connect("env-get-outdated", _env_get_outdated)
    app.connect("doctree-read", _doctree_read)
    app.connect("env-updated", _env_updated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
