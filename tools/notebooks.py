"""CI checks over the book's notebooks. Each subcommand exits non-zero with a readable reason.

python tools/notebooks.py sources     write each generated .ipynb (what Colab and nbgrader open) from its
                                      MyST Markdown source: book/NN_x.md, solutions/NN_x/NN_x.md;
                                      --check: fail where they disagree; --from-ipynb NOTEBOOK: write
                                      the .md source of a notebook written as .ipynb (a new assignment)
python tools/notebooks.py run         execute book/ and solutions/ notebooks with papermill, timing each;
                                      the chapters' outputs go into the book build's execution cache;
                                      a notebook that leaves a process or a temporary file behind fails
python tools/notebooks.py hygiene     no outputs, plain metadata, the same setup cell everywhere, and
                                      no code line of a source wider than 88 columns (the page's)
python tools/notebooks.py exercises   exercises/ equals a fresh generation from solutions/, and
                                      each exercise notebook fails only with NotImplementedError,
                                      only in answer and test cells
python tools/notebooks.py leaks       no solution or hidden-test text in exercises/ or _build/html
python tools/notebooks.py prose       each figure with a unit (or in scientific notation) in a chapter's
                                      prose is printed by a cell (a claim's echo does not count), each
                                      figure a cell draws is shown, each claim() quotes a sentence the
                                      chapter's prose contains, claims take under 2% of a page, and
                                      no pop quiz's answer shows outside its fold (tools/quizzes.py)
python tools/notebooks.py points      points are stated once (nbgrader metadata) and the prose agrees
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: tools/ is a package of the repository root
    sys.path.insert(0, str(ROOT))
from grading import assignment  # noqa: E402
from tools import chapter_refs, claim_figures, claim_fold, execution_cache, leaks, prose, quizzes  # noqa: E402
from tools.prose import (  # noqa: E402
    _CODE_IN_PROSE,
    QUOTED_FIGURE,
    QUOTED_SCIENTIFIC,
    claimed_sentences,
    printed_numbers,
    printed_text,
    unshown_figures,
)


def chapter_sources() -> list[Path]:
    """The chapters' sources (tools/prose.py), under this module's ROOT."""
    return prose.chapter_sources(ROOT)


SETUP_MARK = "# Setup: on Colab this installs the book's helper; everywhere it picks the devices."


SOURCE_FORMAT = "md:myst"
# The widest code line the page shows whole: the code box of a chapter at 1280 px shows 88 columns
# (_static/shardbook.css); ruff lays cells out at this width (`ruff format --line-length 88`).
CODE_WIDTH = 88
FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")  # a fenced block in prose: ```python, or ```{directive}
# A cell id nbformat accepts; a grade_id that is not one gives way to the position-based id.
CELL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
OPTIONS_GAP = re.compile(r"^(```\{code-cell\}\n(?::\w+: .*\n)+)\n", re.M)  # the sources keep none


def solution_sources() -> list[Path]:
    """The assignments' sources: solutions/<a>/<a>.md, MyST Markdown notebooks with nbgrader metadata."""
    return sorted((ROOT / "solutions").glob("*/*.md"))


def notebook_sources() -> list[Path]:
    """Every MyST Markdown source whose .ipynb beside it is generated: chapters, then assignments."""
    return chapter_sources() + solution_sources()


def book_notebooks() -> list[Path]:
    """The chapters' generated .ipynb, the files Colab opens and `run` executes."""
    return [p.with_suffix(".ipynb") for p in chapter_sources()]


def source_notebook(source: Path) -> nbformat.NotebookNode:
    """The notebook a .md source stands for, as committed beside it: kernelspec only, no outputs, and
    the same cell ids on every generation: a cell's nbgrader grade_id where it has one (an assignment's
    cells keep their ids when a cell is added), else the notebook's name and the cell's position. An
    assignment's cells state only grade_id and points; nbgrader's metadata is generated from them
    (grading/assignment.py). A chapter named in Markdown by ``{chapter}`` is written out in words
    ("Chapter 3", tools/chapter_refs.py), since Colab does not render MyST roles."""
    import jupytext

    nb = jupytext.read(source, fmt=SOURCE_FORMAT)
    nb.metadata = nbformat.from_dict({"kernelspec": nb.metadata.get("kernelspec", {})})
    nb.nbformat, nb.nbformat_minor = 4, 5
    for index, cell in enumerate(nb.cells):
        try:
            assignment.expand(cell)
        except ValueError as e:
            fail(f"{source.relative_to(ROOT)}: {e}")
        grade_id = assignment.grade_id(cell) or ""
        cell.id = grade_id if CELL_ID.match(grade_id) else f"{source.stem}-{index:03d}"[-64:]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "markdown":  # Colab and Jupyter do not render MyST roles
            try:
                cell.source = chapter_refs.plain(cell.source)
            except chapter_refs.UnknownChapter as e:
                fail(f"{source.relative_to(ROOT)}: {e}")
    ids = [c.id for c in nb.cells]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        fail(f"{source.relative_to(ROOT)}: cell ids {twice} occur twice (grade_ids must be unique)")
    return nb


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The committed text of a generated .ipynb, given its source_notebook() (nbformat's own layout)."""
    return nbformat.writes(nb) + "\n"


def _stray_notebooks() -> list[str]:
    """Notebooks in book/ and solutions/ that have no .md source beside them."""
    notebooks = sorted((ROOT / "book").glob("*.ipynb")) + solution_notebooks()
    return [str(p.relative_to(ROOT)) for p in notebooks if not p.with_suffix(".md").exists()]


def cmd_sources(args) -> None:
    """Writes x.ipynb from each MyST source x.md (chapters and solutions), or with --check fails where
    one differs or is missing. --from-ipynb converts notebooks into sources first (see convert_to_source)."""
    for path in getattr(args, "from_ipynb", None) or []:
        convert_to_source(_notebook_path(path))
    chapters = chapter_sources()
    stray = _stray_notebooks()
    if stray:
        fail(
            f"notebooks with no .md source: {stray}; a notebook's .md is its source (for a notebook written"
            " as .ipynb: `python tools/notebooks.py sources --from-ipynb <path>`)"
        )
    sources = notebook_sources()
    if not sources:
        fail("found no sources (book/*.md that myst-nb reads as a notebook, solutions/*/*.md)")
    stale = []
    for source in sources:
        target, text = source.with_suffix(".ipynb"), notebook_text(source_notebook(source))
        if target.exists() and target.read_text() == text:
            continue
        if args.check:
            stale.append(str(target.relative_to(ROOT)))
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        fail(f"{', '.join(stale)} disagree with their .md source: run `make sources` and commit the result")
    print(f"sources: {len(sources)} .md sources ({len(chapters)} chapters) and their .ipynb agree: ok")


def _notebook_path(name: str) -> Path:
    """A notebook named by its path, or an assignment by its folder name (11_training)."""
    path = Path(name)
    if not path.suffix and (ROOT / "solutions" / name).is_dir():
        path = ROOT / "solutions" / name / f"{name}.ipynb"
    path = path if path.is_absolute() else (Path.cwd() / path)
    if path.suffix != ".ipynb" or not path.is_file():
        fail(f"{name}: not a notebook, nor an assignment folder of solutions/")
    return path.resolve()


def _cells(nb) -> list[tuple[str, str, dict]]:
    return [(c.cell_type, c.source, dict(c.get("metadata", {}))) for c in nb.cells]


def convert_to_source(notebook: Path) -> Path:
    """Writes the MyST Markdown source of a notebook written as .ipynb, and the .ipynb generated from it.

    For an assignment that arrives as solutions/NN_x/NN_x.ipynb (and once for each chapter). Fails,
    writing nothing, unless the source gives back every cell's type, text and metadata (nbgrader's
    included; blank lines at a cell's end are dropped first, as MyST Markdown has no place for them);
    the cell ids change (see source_notebook), so regenerate exercises/ afterwards. A cell's nbgrader
    metadata becomes its grade_id and points (grading/assignment.py); metadata that does not follow
    from them fails too. "Chapter 3" in Markdown becomes ``{chapter}`03_explicit_sharding``` (which
    the generated notebook writes out as "Chapter 3" again).
    """
    import jupytext

    nb = nbformat.read(notebook, as_version=4)
    nb.metadata = nbformat.from_dict({"kernelspec": nb.metadata.get("kernelspec", {})})
    for cell in nb.cells:
        cell.source = cell.source.rstrip("\n")  # MyST Markdown keeps no blank lines at a cell's end
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        else:  # a source names chapters by page; the notebook generated from it says the same words
            cell.source = chapter_refs.as_roles(cell.source)
    source = notebook.with_suffix(".md")
    if source.exists():
        fail(f"{source.relative_to(ROOT)} exists already: it is the source; edit it instead")
    try:
        text = OPTIONS_GAP.sub(r"\1", jupytext.writes(assignment.short_form(nb), fmt=SOURCE_FORMAT))
    except ValueError as e:
        fail(f"{notebook.relative_to(ROOT)}: {e}; left as it is")
    back = assignment.full_form(jupytext.reads(text, fmt=SOURCE_FORMAT))
    if _cells(back) != _cells(nb):
        lost = [i for i, cell in enumerate(_cells(nb)) if i >= len(back.cells) or _cells(back)[i] != cell]
        fail(f"{notebook.relative_to(ROOT)}: cell {lost[:1]} would not survive MyST Markdown; left as it is")
    source.write_text(text)
    notebook.write_text(notebook_text(source_notebook(source)))
    print(f"wrote {source.relative_to(ROOT)} (the source from now on) and regenerated {notebook.name}")
    return source


def solution_notebooks() -> list[Path]:
    return sorted((ROOT / "solutions").glob("*/*.ipynb"))


def exercise_notebooks() -> list[Path]:
    return sorted((ROOT / "exercises").glob("*/*.ipynb"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # A backend forced from outside (MPLBACKEND=Agg) would reach the kernels and turn every figure into
    # "<Figure size ...>" text; without it, a kernel draws with matplotlib's inline backend.
    env.pop("MPLBACKEND", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["SHARDBOOK_PHONE_FIGURES"] = "1"  # the pages' figures get their phone images (shardbook.viz.phone)
    return env


def _use_env() -> None:
    """Makes _env() this process's environment, which the kernels papermill and nbclient start inherit."""
    os.environ.update(_env())
    os.environ.pop("MPLBACKEND", None)


def fail(message: str) -> None:
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def _executed_path(out_dir: Path, path: Path) -> Path:
    """Where the executed copy of a notebook goes: book/x.ipynb -> _build/executed/book/x.ipynb."""
    target = out_dir / path.relative_to(ROOT)
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def cmd_run(args) -> None:
    """Executes every book and solution notebook; fails on the first error, prints each one's time.

    ``--jobs N`` executes N notebooks at a time, each in a worker process of its own, the longest
    (by source size) first, so that chapter 11 never waits behind the others.

    Each notebook runs with a temporary folder of its own (TMPDIR, inherited by its kernel and every
    process that starts): when the kernel has ended, no process started from it may be left, and the
    folder must be empty (chapter 12 starts worker processes, kills one on purpose and writes
    checkpoints; :func:`left_behind`).

    A chapter's executed outputs go into the book build's execution cache (tools/execution_cache.py),
    so `make book` shows them without executing the chapter again. A chapter the cache already holds,
    with the same code cells and helper package, is not executed again (unless --force): its executed
    copy is written from the cache.
    """
    out_dir = ROOT / "_build" / "executed"
    out_dir.mkdir(parents=True, exist_ok=True)
    solutions = [] if args.chapters else solution_notebooks()
    paths = [Path(p).resolve() for p in args.paths] or book_notebooks() + solutions
    chapters = {p: p.with_suffix(".md") for p in book_notebooks()}
    sources = {p.with_suffix(".ipynb"): p for p in notebook_sources()}
    cache = execution_cache.open_cache()
    _use_env()
    from_cache, to_run = 0, []
    for path in paths:
        executed = _executed_path(out_dir, path)
        if path in sources and path.read_text() != notebook_text(source_notebook(sources[path])):
            # A chapter's outputs would be cached under the .md's code while papermill ran the .ipynb's.
            fail(f"{path.relative_to(ROOT)} disagrees with its .md source: run `make sources` first")
        source = source_notebook(chapters[path]) if path in chapters else None
        cached = None if source is None or args.force else execution_cache.cached_outputs(cache, source)
        if cached is not None:
            nbformat.write(cached, executed)
            print(f"{'cached':>9}  {path.relative_to(ROOT)}", flush=True)
            from_cache += 1
        else:
            to_run.append((path, executed, source))
    total, start = 0.0, time.monotonic()
    jobs = max(1, min(args.jobs, len(to_run)))
    tasks = [(path, executed, args.cell_timeout, str(path.relative_to(ROOT))) for path, executed, _ in to_run]
    pool = None
    results: Iterator[tuple[Path, float, str | None]] = map(_execute_one, tasks)
    if jobs > 1:
        tasks.sort(key=lambda t: -t[0].stat().st_size)
        pool = multiprocessing.get_context("spawn").Pool(jobs)
        results = pool.imap_unordered(_execute_one, tasks)
    try:
        for path, seconds, problem in results:
            if problem:
                fail(problem)
            source = next(s for p, _, s in to_run if p == path)
            executed = _executed_path(out_dir, path)
            if source is not None:
                _cache_chapter(cache, chapters[path], source, nbformat.read(executed, as_version=4), seconds)
            total += seconds
            print(f"{seconds:7.1f} s  {path.relative_to(ROOT)}", flush=True)
    finally:
        if pool is not None:  # after a failure, the other workers' kernels end with them (parent gone)
            pool.terminate()
            pool.join()
    cached = f", {from_cache} outputs from the cache" if from_cache else ""
    side = f"; {time.monotonic() - start:.1f} s of wall time, {jobs} at a time" if jobs > 1 else ""
    print(f"{total:7.1f} s  in all ({len(paths)} notebooks{cached}{side})")


def _execute_one(task: tuple[Path, Path, int, str]) -> tuple[Path, float, str | None]:
    """Executes one notebook with papermill in this process (a worker inherits the environment
    _use_env made): (path, seconds, what went wrong or None). ``task``: the notebook, where its
    executed copy goes, the cell time limit, its name in messages."""
    import papermill

    path, executed, cell_timeout, name = task
    tmpdir = os.environ.get("TMPDIR", tempfile.gettempdir())
    start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="shardbook-run-"))
    os.environ["TMPDIR"] = str(scratch)  # the kernel's, and every process it starts
    try:
        papermill.execute_notebook(
            str(path),
            str(executed),
            cwd=str(path.parent),
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            execution_timeout=cell_timeout,
            # One output per stream per cell, as the kernel wrote it: how the chunks of a print()
            # arrive varies from run to run, and myst-nb would join them with a line break.
            coalesce_streams=True,
            # Written once, when the run ends or a cell fails, not as each cell starts and ends:
            # each save validates and serialises the whole notebook, its images too (chapter 11:
            # about 170 saves), which took more CPU than a small chapter's kernel (2026-12-07).
            request_save_on_cell_execute=False,
        )
    except papermill.PapermillExecutionError as e:
        return path, 0.0, f"{name}: cell {e.exec_count} raised {e.ename}: {e.evalue}"
    finally:
        os.environ["TMPDIR"] = tmpdir
    left = left_behind(scratch)
    if left:
        return path, 0.0, f"{name} left behind, after its kernel ended: {'; '.join(left)}"
    shutil.rmtree(scratch, ignore_errors=True)
    return path, time.monotonic() - start, None


def left_behind(scratch: Path, settle: float = 5.0) -> list[str]:
    """What a notebook's run left after its kernel ended: processes started from it (their command line
    or environment names ``scratch``, the TMPDIR it ran with) still alive ``settle`` seconds later, and
    files in ``scratch`` (worker folders, checkpoints, launcher scripts)."""
    mark = str(scratch).encode()
    deadline = time.monotonic() + settle
    while True:
        alive = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f, open(f"/proc/{pid}/environ", "rb") as g:
                    if mark in f.read() or mark in g.read():
                        alive.append(pid)
            except OSError:  # ended meanwhile, or not ours to read
                continue
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    found = [f"process {pid} still running" for pid in alive]
    return found + [f"{p.relative_to(scratch)} in its temporary folder" for p in sorted(scratch.iterdir())]


def _cache_chapter(cache, md: Path, source, executed, seconds: float) -> None:
    """Stores papermill's outputs of a chapter under the key the book build looks it up by.

    The key is computed from the notebook myst-nb reads from the .md (code cells with their metadata,
    kernelspec); papermill's own cell metadata is left out of it. Fails if the build would not find it.
    """
    from jupyter_cache.base import CacheBundleIn
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    if len(executed.cells) != len(source.cells):
        fail(
            f"{md.relative_to(ROOT)}: papermill returned {len(executed.cells)} cells, not {len(source.cells)}"
        )
    for cell, done in zip(source.cells, executed.cells, strict=True):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = done.outputs, done.execution_count
    # The kernel's language_info names the highlighter of the page's code cells (ipython3); it is not
    # part of the key.
    source.metadata["language_info"] = executed.metadata.get("language_info", {})
    uri = str(md.relative_to(ROOT))
    cache.cache_notebook_bundle(
        CacheBundleIn(source, uri, data={"execution_seconds": seconds}), check_validity=True, overwrite=True
    )
    as_the_build_reads_it = read_myst_markdown_notebook(md.read_text(), MdParserConfig())
    if execution_cache.cached_outputs(cache, as_the_build_reads_it) is None:
        fail(f"{uri}: its outputs were cached under a key the book build does not compute (myst-nb's reader)")


def cmd_prose(args) -> None:
    """Each figure with a unit in a chapter's prose appears in that chapter's executed outputs.

    Reads the copies `run` wrote to _build/executed/book/. Collapsed quiz answers (admonitions) are
    skipped: they derive figures step by step, and their cell prints the result. A pop quiz's answer
    shows nowhere outside its fold, in prose, code or output (tools/quizzes.py). A figure a claim's
    sentence states is written in its condition or given its value (tools/claim_figures.py). A TPU
    time or memory figure, in prose or printed, names its source (tools/prose.py, shardbook/sources.py).
    """
    problems = claim_figures.source_problems(chapter_sources())
    claims = 0
    shares: list[tuple[float, str]] = []
    for path in book_notebooks():
        sentences, claim_problems = claimed_sentences(_read_source(path.with_suffix(".md")))
        claims += len(sentences)
        problems += [f"{path.with_suffix('.md').name}, {p}" for p in claim_problems]
        executed = ROOT / "_build" / "executed" / "book" / path.name
        if not executed.exists():
            fail(f"{executed.relative_to(ROOT)} is missing: run `tools/notebooks.py run` first")
        nb = nbformat.read(executed, as_version=4)
        printed_values = printed_numbers(printed_text(nb))
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "markdown" or "{admonition}" in cell.source:
                continue
            quoted = QUOTED_FIGURE.findall(cell.source) + [
                (n, "") for n in QUOTED_SCIENTIFIC.findall(_CODE_IN_PROSE.sub("", cell.source))
            ]
            for number, unit in quoted:
                if Decimal(number.replace(",", "")) not in printed_values:
                    figure = f"{number} {unit}".strip()
                    problems.append(
                        f"{path.with_suffix('.md').name}, cell {index}: prose says {figure},"
                        " no output prints it"
                    )
        problems += [f"{path.with_suffix('.md').name}, {p}" for p in unshown_figures(nb)]
        problems += [f"{path.with_suffix('.md').name}, {p}" for p in prose.unsourced_tpu_figures(nb)]
        problems += [f"{path.with_suffix('.md').name}, {p}" for p in quizzes.spoilers(nb)]
        shown, by_claims = claim_fold.page_lines(nb)
        shares.append((by_claims / max(shown, 1), path.stem))
        if by_claims >= claim_fold.MAX_CLAIM_SHARE * shown:
            problems.append(
                f"{path.with_suffix('.md').name}: claims take {by_claims} of the page's {shown} lines,"
                f" {by_claims / shown:.1%} (at most {claim_fold.MAX_CLAIM_SHARE:.0%}): tools/claim_fold.py"
                " folds claim() statements; a claim hidden in other code stays on the page"
            )
    if problems:
        fail(
            "figures no cell prints or shows, TPU figures without their source (shardbook/sources.py),"
            " claims the prose does not make, claims in the reader's way, or quiz answers outside their"
            " fold:\n  " + "\n  ".join(problems)
        )
    print("every figure quoted in the chapters' prose is printed, and every figure drawn is shown: ok")
    print("every TPU time or memory figure, printed or written, names its source: ok")
    print("no pop quiz shows its answer outside its fold: ok")
    share, page = max(shares)
    print(f"claims take at most {share:.2%} of a page's lines ({page}): ok")
    print(f"{claims} comparative sentences checked by claim() quote the prose word for word: ok")


def _read_source(path: Path) -> nbformat.NotebookNode:
    """A committed notebook as written: a .md source (its jupytext header aside) or an .ipynb."""
    if path.suffix != ".md":
        return nbformat.read(path, as_version=4)
    import jupytext

    nb = jupytext.read(path, fmt=SOURCE_FORMAT)
    nb.metadata.pop("jupytext", None)
    return nb


def wide_code_lines(nb, width: int = CODE_WIDTH) -> list[str]:
    """'cell N, line L: C columns' for each line longer than `width` columns of a code cell, or of a
    code block fenced in prose (shown in the same box)."""
    found = []
    for index, cell in enumerate(nb.cells):
        fence, code = None, cell.cell_type == "code"  # in prose: the open fence, and if it is code
        for number, line in enumerate(cell.source.splitlines(), 1):
            opened = FENCE.match(line) if cell.cell_type == "markdown" else None
            if opened and fence is None:
                fence, code = opened[1], not opened[2].startswith("{")  # ```{directive} is not code
                continue
            if fence is not None and line.strip() == fence:
                fence, code = None, False
                continue
            if code and len(line) > width:
                found.append(f"cell {index}, line {number}: {len(line)} columns")
    return found


def cmd_hygiene(args) -> None:
    """Committed notebooks carry no outputs, only plain metadata, and the one shared setup cell."""
    problems = []
    reference = None
    # A notebook with a .md source is checked in it; `sources --check` holds its .ipynb to the source.
    solutions = [p.with_suffix(".md") if p.with_suffix(".md").exists() else p for p in solution_notebooks()]
    for path in chapter_sources() + solutions + exercise_notebooks():
        rel = path.relative_to(ROOT)
        nb = _read_source(path)
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError as e:
            problems.append(f"{rel}: not a valid notebook ({e.message})")
        if set(nb.metadata) - {"kernelspec", "language_info"}:
            problems.append(f"{rel}: notebook metadata has {sorted(set(nb.metadata))}; keep kernelspec only")
        if nb.metadata.get("kernelspec", {}).get("name") != "python3":
            problems.append(f"{rel}: kernelspec must be the standard 'python3'")
        code = [c for c in nb.cells if c.cell_type == "code"]
        for c in code:
            if c.get("outputs") or c.get("execution_count"):
                problems.append(f"{rel}: committed with outputs (clear them; the build executes notebooks)")
                break
        setup = code[0].source if code else ""
        if not setup.startswith(SETUP_MARK):
            problems.append(f"{rel}: the first code cell must be the setup cell (see CONTRIBUTING.md)")
        elif reference is None:
            reference = (rel, setup)
        elif setup != reference[1]:
            problems.append(f"{rel}: its setup cell differs from {reference[0]}'s")
        if path.suffix == ".md":  # the sources authors write; exercises/ are generated from them
            wide = wide_code_lines(nb)
            if wide:
                problems.append(
                    f"{rel}: code wider than the page's {CODE_WIDTH} columns ({'; '.join(wide[:5])}"
                    f"{f'; {len(wide) - 5} more' if len(wide) > 5 else ''}): run `ruff format"
                    f" --line-length {CODE_WIDTH}` on the cell, split long strings and comments"
                )
    if problems:
        fail("\n  " + "\n  ".join(problems))
    print("notebook hygiene: ok")


POINTS_TOTAL = re.compile(r"Points:\s*(\d+)\s+in all")
EXERCISE_HEADING = re.compile(r"^#{1,4} Exercise (\d+\.\d+)\b.*?\((\d+) points?\)\s*$", re.M)
EXERCISE_POINTS_IN_PROSE = re.compile(r"Exercise (\d+\.\d+)\b[^\n]*?\((\d+) points?\)")
ASSIGNMENT_POINTS_IN_PROSE = re.compile(r"Assignment (\d+)\b[^\n]*?\((\d+) points?\)")
ANY_EXERCISE_HEADING = re.compile(r"^#{1,4} Exercise (\d+\.\d+)\b.*$", re.M)
# Any statement of points in prose: "3 points", "1 point", "Points: 14".
POINTS_MENTION = re.compile(r"\b\d+\s+points?\b|\bpoints?:\s*\d+", re.I)


def unchecked_mentions(text: str, checked: list[re.Pattern]) -> list[str]:
    """The lines of `text` stating points outside every match of the `checked` patterns: a statement
    that no check compares with the metadata ("worth 3 points", a heading "(3 pts)")."""
    spans = [m.span() for pattern in checked for m in pattern.finditer(text)]
    lines = []
    for m in POINTS_MENTION.finditer(text):
        if not any(start <= m.start() and m.end() <= end for start, end in spans):
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            lines.append(text[start : end if end >= 0 else len(text)].strip())
    return lines


def _cell_points(cell) -> int:
    return int(assignment.points(cell))


def points_problems(nb, name: str) -> tuple[list[str], dict[str, int]]:
    """Points are stated once, in the test cells' nbgrader metadata; the prose must agree with it.

    Checks the intro's "Points: N in all" against the sum over all graded cells, and each exercise
    heading's "(P points)" against the graded cells between it and the next heading; an exercise
    heading without "(P points)", or points stated anywhere else in the prose, is a problem too (no
    check would compare them). Returns the problems and {exercise number: points by metadata}.
    """
    problems, per_exercise = [], {}
    total = sum(_cell_points(c) for c in nb.cells)
    stated = [int(n) for c in nb.cells if c.cell_type == "markdown" for n in POINTS_TOTAL.findall(c.source)]
    if len(stated) != 1:
        problems.append(f"{name}: the intro must say 'Points: N in all' once (found {len(stated)} times)")
    elif stated[0] != total:
        problems.append(
            f"{name}: the intro says 'Points: {stated[0]} in all'; the test cells' metadata sums to {total}"
        )
    current: str | None = None
    heading_points: dict[str, int] = {}
    counted: dict[str, int] = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for heading in ANY_EXERCISE_HEADING.finditer(cell.source):
                if not EXERCISE_HEADING.fullmatch(heading.group(0)):
                    problems.append(f"{name}: the heading {heading.group(0)!r} must end with '(P points)'")
            for line in unchecked_mentions(cell.source, [POINTS_TOTAL, EXERCISE_HEADING]):
                problems.append(
                    f"{name}: {line!r} states points where no check compares them with the metadata;"
                    " say them only in the intro's 'Points: N in all' and the exercise headings"
                )
            for number, points in EXERCISE_HEADING.findall(cell.source):
                current = number
                heading_points[number] = int(points)
                counted.setdefault(number, 0)
        elif _cell_points(cell):
            if current is None:
                grade_id = assignment.grade_id(cell)
                problems.append(f"{name}: test cell {grade_id} carries points before any exercise heading")
            else:
                counted[current] += _cell_points(cell)
    for number, points in heading_points.items():
        per_exercise[number] = counted[number]
        if points != counted[number]:
            problems.append(
                f"{name}: Exercise {number}'s heading says {points} points; its test cells' metadata gives"
                f" {counted[number]}"
            )
    return problems, per_exercise


def cmd_points(args) -> None:
    """Assignment intros and exercise headings agree with the points in the test cells' nbgrader
    metadata; a book page may state an exercise's or an assignment's points only as "Exercise N.k …
    (P points)" or "Assignment N … (P points)", checked likewise."""
    problems, per_exercise, per_assignment = [], {}, {}
    for path in solution_notebooks():
        nb = nbformat.read(path, as_version=4)
        found, points = points_problems(nb, str(path.relative_to(ROOT)))
        problems += found
        per_exercise.update(points)
        number = re.match(r"\d+", path.parent.name)
        if number:
            per_assignment[str(int(number.group(0)))] = sum(_cell_points(c) for c in nb.cells)
    chapters = chapter_sources()
    pages = [(p, p.read_text()) for p in sorted((ROOT / "book").glob("*.md")) if p not in chapters]
    pages += [
        (p, "\n".join(c.source for c in _read_source(p).cells if c.cell_type == "markdown")) for p in chapters
    ]
    for path, text in pages:
        for number, points in EXERCISE_POINTS_IN_PROSE.findall(text):
            if per_exercise.get(number) != int(points):
                problems.append(
                    f"{path.relative_to(ROOT)}: says Exercise {number} is worth {points} points; its test"
                    f" cells' metadata gives {per_exercise.get(number, 'no such exercise')}"
                )
        for number, points in ASSIGNMENT_POINTS_IN_PROSE.findall(text):
            if per_assignment.get(str(int(number))) != int(points):
                problems.append(
                    f"{path.relative_to(ROOT)}: says Assignment {number} is worth {points} points; its test"
                    f" cells' metadata gives {per_assignment.get(str(int(number)), 'no such assignment')}"
                )
        for line in unchecked_mentions(text, [EXERCISE_POINTS_IN_PROSE, ASSIGNMENT_POINTS_IN_PROSE]):
            problems.append(
                f"{path.relative_to(ROOT)}: {line!r} states points no check compares with the metadata;"
                " write 'Exercise N.k … (P points)' or 'Assignment N … (P points)'"
            )
    if problems:
        fail("points stated in prose disagree with the nbgrader metadata:\n  " + "\n  ".join(problems))
    print(
        f"points: {len(per_exercise)} exercises of {len(per_assignment)} assignments; intros, headings"
        f" and {len(pages)} book pages agree with the metadata: ok"
    )


def generate_exercises(into: Path) -> None:
    """Runs nbgrader generate_assignment for every assignment into the folder `into` (each in a process
    forked from grading's nbgrader server, which imports nbgrader once for all of them)."""
    from grading import nbgrader_process

    with tempfile.TemporaryDirectory() as db_dir:
        for assignment in sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()):
            args = ["generate_assignment", assignment, "--force"]
            args += [f"--CourseDirectory.release_directory={into}"]
            args += [f"--CourseDirectory.db_url=sqlite:///{db_dir}/gradebook.db"]
            code, log = nbgrader_process.run(args, ROOT, _env(), timeout=600)
            if code != 0:
                fail(f"nbgrader could not generate {assignment}:\n{log}")


def _comparable(path: Path):
    nb = nbformat.read(path, as_version=4)
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells], dict(nb.metadata)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def cmd_leaks(args) -> None:
    """No solution or hidden-test line, and no nbgrader marker, in exercises/, the chapters' sources or
    the built site."""
    secrets = leaks.secret_lines(solution_notebooks())
    if not secrets:
        fail("found no solution lines to look for: is solutions/ empty?")
    targets = [(p, leaks.notebook_plain_text(p)) for p in exercise_notebooks()]
    # The chapters as written (their pages are checked again in the built site, with their outputs).
    targets += [(p, p.read_text(errors="replace")) for p in chapter_sources()]
    # Anything else released with an exercise (an assignment's .md source must never be among them).
    released = _files(ROOT / "exercises")
    targets += [(p, p.read_text(errors="replace")) for p in released if p.suffix != ".ipynb"]
    html_root = ROOT / "_build" / "html"
    if args.require_html and not html_root.is_dir():
        fail("_build/html does not exist: build the book first (make book)")
    if html_root.is_dir():
        targets += [(p, leaks.html_text(p)) for p in html_root.rglob("*.html")]
        targets += [(p, leaks.notebook_plain_text(p)) for p in html_root.rglob("*.ipynb")]
        # The other sources Sphinx publishes beside the pages (intro.md as _sources/book/intro.md).
        targets += [(p, p.read_text(errors="replace")) for p in (html_root / "_sources").rglob("*.md*")]
        for forbidden in ("solutions", "grading"):
            if (html_root / forbidden).exists() or (html_root / "_sources" / forbidden).exists():
                fail(f"_build/html contains {forbidden}/: it must never be published")
    found = []
    for path, text in targets:
        found += [f"{path.relative_to(ROOT)}: {what}" for what in leaks.leaks_in(text, secrets)]
    if found:
        fail("hidden text leaked:\n  " + "\n  ".join(found[:20]))
    print(f"no leaks: {len(secrets)} solution and hidden-test lines checked in {len(targets)} files")


def cmd_exercises(args) -> None:
    """exercises/ equals a fresh generation; run top to bottom, each fails only where it should."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / "exercises"
        generate_exercises(fresh)
        # Every file, not only notebooks: nbgrader copies an assignment folder's other files too.
        committed = {p.relative_to(ROOT / "exercises") for p in _files(ROOT / "exercises")}
        generated = {p.relative_to(fresh) for p in _files(fresh)}
        if committed != generated:
            have, want = sorted(map(str, committed)), sorted(map(str, generated))
            fail(f"exercises/ holds {have}, solutions/ generate {want}: run `make exercises`")
        for rel in sorted(generated):
            if rel.suffix != ".ipynb":
                if (ROOT / "exercises" / rel).read_bytes() != (fresh / rel).read_bytes():
                    fail(f"exercises/{rel} is out of date: run `make exercises` and commit the result")
            elif _comparable(ROOT / "exercises" / rel) != _comparable(fresh / rel):
                fail(f"exercises/{rel} is out of date: run `make exercises` and commit the result")
    print("exercises match solutions: ok")
    for path in exercise_notebooks():
        check_exercise_runs(path)


def check_exercise_runs(path: Path) -> None:
    """Runs an exercise notebook; errors are allowed only as NotImplementedError in answer/test cells."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    start = time.monotonic()
    _use_env()
    resources = {"metadata": {"path": str(path.parent)}}
    NotebookClient(nb, timeout=300, allow_errors=True, resources=resources).execute()
    problems = []
    errors = 0
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            errors += 1
            where = f"cell {index} ({assignment.grade_id(cell) or 'no grade_id'})"
            if assignment.kind(cell) not in (assignment.Kind.ANSWER, assignment.Kind.TEST):
                problems.append(f"{where} is not an answer or test cell but raised {output['ename']}")
            elif output.get("ename") != "NotImplementedError":
                problems.append(f"{where} raised {output['ename']}: {output.get('evalue', '')[:200]}")
    if problems:
        fail(f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems))
    seconds = time.monotonic() - start
    print(f"{path.relative_to(ROOT)}: runs, {errors} cells stop at NotImplementedError ({seconds:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("paths", nargs="*")
    run.add_argument("--cell-timeout", type=int, default=600)
    run.set_defaults(func=cmd_run)
    run.add_argument("--force", action="store_true", help="execute chapters the cache already holds")
    run.add_argument("--jobs", type=int, default=1, help="notebooks executed at a time (default 1)")
    run.add_argument(
        "--chapters",
        action="store_true",
        help="chapters only (`make test`: tests/test_submissions.py runs every solution's cells in-process)",
    )
    # `chapters`: its name from before solutions had sources too.
    sources = sub.add_parser("sources", aliases=["chapters"])
    sources.add_argument("--check", action="store_true")
    sources.add_argument(
        "--from-ipynb", nargs="+", metavar="NOTEBOOK", help="a notebook (or assignment) to give a .md source"
    )
    sources.set_defaults(func=cmd_sources)
    sub.add_parser("hygiene").set_defaults(func=cmd_hygiene)
    sub.add_parser("prose").set_defaults(func=cmd_prose)
    sub.add_parser("exercises").set_defaults(func=cmd_exercises)
    sub.add_parser("points").set_defaults(func=cmd_points)
    leak = sub.add_parser("leaks")
    leak.add_argument("--require-html", action="store_true")
    leak.set_defaults(func=cmd_leaks)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
