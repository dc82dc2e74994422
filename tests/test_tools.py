"""tools/notebooks.py: the CI checks over notebooks catch what they are for."""

import json
import os
import shutil
import subprocess
import sys
import time
import types
from decimal import Decimal

import nbformat
import pytest

from tests.notebooks import ROOT, assignment_notebook
from tools import leaks, prose
from tools import notebooks as nbtools


def test_secret_lines_hold_solution_and_hidden_test_code():
    lines = leaks.secret_lines(nbtools.solution_notebooks())
    assert "return tuple(block)" not in lines  # too generic to count
    assert any("graders.check_per_device_shape(per_device_shape)" in line for line in lines)
    assert any("sums[position] = np.asarray(shard.data).sum()" in line for line in lines)


def test_leak_check_fails_on_a_planted_solution_line(tmp_path, monkeypatch):
    # A copy of the course whose student notebook carries one line of the instructor's solution.
    for name in ("solutions", "exercises"):
        shutil.copytree(ROOT / name, tmp_path / name)
    leaked = tmp_path / "exercises" / "01_meshes" / "01_meshes.ipynb"
    nb = nbformat.read(leaked, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("sums[position] = np.asarray(shard.data).sum()"))
    nbformat.write(nb, leaked)
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    with pytest.raises(SystemExit):
        nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))
    nbformat.write(nbformat.read(ROOT / "exercises" / "01_meshes" / "01_meshes.ipynb", as_version=4), leaked)
    nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))  # the clean copy passes


def test_quoted_figures_are_found_in_prose():
    text = "It moves 1.5 MiB (4,227,072 bytes) in 49.8 µs; 12 B per device."
    assert prose.QUOTED_FIGURE.findall(text) == [
        ("1.5", "MiB"),
        ("4,227,072", "bytes"),
        ("49.8", "µs"),
        ("12", "B"),
    ]
    # Percentages and rates are figures too: a stale "0.2 %" next to a printed 0.39 % is caught.
    assert prose.QUOTED_FIGURE.findall("costs up to 0.2 % (or 10%) at 486 TFLOP/s; 3%s") == [
        ("0.2", "%"),
        ("10", "%"),
        ("486", "TFLOP/s"),
    ]


def test_a_claim_prints_no_figure_of_its_sentence(capsys):
    # A figure the prose quotes must be printed by the computation: a claim once echoed its sentence,
    # so "the emulation's 1.11e-07" passed beside a table of 1.14e-07. Now it prints nothing.
    from shardbook import claim

    print("emulated 1.14e-07")
    claim("the emulation's 1.11e-07 in 49.8 µs", True)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("...")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=capsys.readouterr().out)]
    nb.cells = [cell]
    printed = prose.printed_numbers(prose.printed_text(nb))
    assert Decimal("1.14e-07") in printed
    assert Decimal("1.11e-07") not in printed and Decimal("49.8") not in printed
    # Figures in scientific notation are quoted figures of the prose; a constant in code is not.
    text = "measured 9.57e-08 (`lr=1e-2`, `eps=3.0e-05`) and 1e-4"
    assert prose.QUOTED_SCIENTIFIC.findall(prose._CODE_IN_PROSE.sub("", text)) == ["9.57e-08"]
    assert prose.QUOTED_FIGURE.findall("1F1B and GPipe") == []  # no byte count at a name's end


def test_a_figure_drawn_but_not_shown_is_found():
    # shardbook's figures are closed in pyplot: a cell shows one only as its last expression (or by
    # display()). Chapter 9 once drew its error-against-cost figure and then ran two claims.
    png = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 640x480 with 1 Axes>"}
    drawn = nbformat.v4.new_code_cell('shardbook.draw_precision_tradeoff(errors)\nclaim("x", True)')
    shown = nbformat.v4.new_code_cell('claim("x", True)\nshardbook.draw_precision_tradeoff(errors)')
    shown.outputs = [nbformat.v4.new_output("display_data", data=png)]
    panels = nbformat.v4.new_code_cell("fig, ax = plt.subplots()\ndraw_timeline(est, ax=ax)\nplt.close(fig)")
    defined = nbformat.v4.new_code_cell("def picture(x):\n    return draw_sharding(x)")
    nb = nbformat.v4.new_notebook(cells=[drawn, shown, panels, defined])
    found = prose.unshown_figures(nb)
    assert len(found) == 2
    assert found[0].startswith("cell 0 draws a figure (draw_precision_tradeoff) and shows none")
    assert found[1].startswith("cell 2 draws a figure (subplots)")


def test_claims_fold_into_one_line_at_the_page_end():
    from docutils import nodes
    from docutils.utils import new_document

    from tools import claim_fold

    source = (
        "x = 2\n"
        "# the check of the sum\n"
        'claim("x is two", x == 2, because=f"{x}")\n'
        "for k in range(2):\n"
        "    print(k)\n"
        '    claim("k is small", k < 2)\n'
        "for k in range(2):\n"
        '    shardbook.claim("k is smaller", k < 3)\n'
        "print(x)"
    )
    shown, folded = claim_fold.split_claims(source)
    assert shown == "x = 2\nfor k in range(2):\n    print(k)\nprint(x)"
    assert [f.sentences for f in folded] == [("x is two",), ("k is small",), ("k is smaller",)]
    assert folded[0].code.startswith("# the check of the sum\nclaim(")
    assert claim_fold.split_claims("%time y = 1") == ("%time y = 1", [])
    # The page built from a notebook: a claim-only cell disappears, the list sits at the end.
    doc = new_document("page")
    section = nodes.section()
    doc += section
    quiz_check = 'claim("the answer is 55.25 GiB", True)'  # a folded cell's claims stay in its fold
    for code, classes in (
        (source, ["cell"]),
        ('claim("alone", True)', ["cell"]),
        (quiz_check, ["tag_hide-cell"]),
    ):
        cell = nodes.container(nb_element="cell_code", classes=classes)
        cell_input = nodes.container(nb_element="cell_code_source")
        cell_input += nodes.literal_block(code, code, language="ipython3")
        cell += cell_input
        section += cell
    assert len(claim_fold.fold_doctree(doc)) == 4
    assert [b.astext() for b in doc.findall(nodes.literal_block)] == [shown, quiz_check]
    assert "55.25" not in section.children[-1].astext()
    assert "✓ The build checked 4 sentences of this page" in section.children[-1].astext()
    # The measure of the 2% rule: before, every claim's code and echo; after, one line.
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("x is two\n\nand k is small")]
    nb.cells += [nbformat.v4.new_code_cell(source)]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="0\n1\n")]
    assert claim_fold.page_lines(nb, fold=False) == (2 + 9 + 2, 5)
    assert claim_fold.page_lines(nb) == (2 + 4 + 2 + 1, 1)
    # and the book's build loads the extension
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert "tools.claim_fold" in config["local_extensions"]
    assert "tools.claim_fold" in config["config"]["extensions"]


def test_the_claim_list_opens_by_section_and_links_each_sentence_back():
    # Appendix A's list once opened to ~7,600 px on a phone: every sentence with its code at once.
    # Now it opens to a line per section; a section to its sentences, each linking back to its text
    # (the section's anchor, then a text fragment) and folding its code.
    from docutils import nodes
    from docutils.utils import new_document

    from tools import claim_fold

    doc = new_document("page")
    for anchor, title, code in (
        ("memory", "Memory", 'claim("an eighth of the memory", True)\nclaim("x-y, & more", True)'),
        ("time", "Time", 'claim("49.8 µs instead of 59.8 µs", True)'),
    ):
        section = nodes.section(ids=[anchor])
        section += nodes.title(title, title)
        cell = nodes.container(nb_element="cell_code", classes=["cell"])
        cell_input = nodes.container(nb_element="cell_code_source")
        cell_input += nodes.literal_block(code, code, language="ipython3")
        cell += cell_input
        section += cell
        doc += section
    assert len(claim_fold.fold_doctree(doc)) == 3
    page = doc.children[-1].children[-1].astext()
    assert page.count('<details class="sb-claims-section"><summary>') == 2
    assert "<summary>Memory: 2 sentences</summary>" in page and "<summary>Time: 1 sentence</summary>" in page
    # each sentence is its own fold, its code inside it, after a link to the sentence in its section
    assert page.count("<details><summary><q>") == 3
    assert '<a class="sb-claim-link" href="#memory:~:text=an%20eighth%20of%20the%20memory">' in page
    assert 'href="#memory:~:text=x%2Dy%2C%20%26%20more"' in page  # the fragment's syntax escaped
    assert 'href="#time:~:text=49.8%20%C2%B5s%20instead%20of%2059.8%20%C2%B5s"' in page
    item = page[page.index("<q>an eighth") :]
    assert item.index("sb-claim-link") < item.index("sb-claim-code") < item.index("</details>")


def test_quoted_figures_match_whole_numbers_only():
    # "1.5" is not printed by an output that says 11.5 or 1.53; thousands commas may be dropped.
    assert not prose.printed_as_token("1.5", "took 11.5 ms")
    assert not prose.printed_as_token("1.5", "took 1.53 ms")
    assert not prose.printed_as_token("227,072", "4,227,072 bytes")
    assert prose.printed_as_token("1.5", "took 1.5 ms.")
    assert prose.printed_as_token("1.5", "(1.5, 2.0)")
    assert prose.printed_as_token("4,227,072", "moved 4227072 bytes")
    assert prose.printed_as_token("4,227,072", "moved 4,227,072 bytes")
    assert prose.printed_as_token("311", "plain jit   311.0 µs")  # the same value
    assert not prose.printed_as_token("64", "all-to-all: f32[16,64]")  # a dimension, not a figure


def test_a_return_line_is_judged_by_what_it_returns():
    # A bare name is generic; a one-line solution is a secret, with or without its trailing comment.
    assert leaks.secret_texts("    return out") == []
    assert leaks.secret_texts("return None") == []
    assert leaks.secret_texts("pass") == []
    one_liner = 'return jnp.matmul(x, w, out_sharding=P("X", "Y"))'
    assert leaks.secret_texts("    " + one_liner) == [one_liner]
    assert leaks.secret_texts(one_liner + "  # all-reduce over Y") == [
        one_liner + "  # all-reduce over Y",
        one_liner,
    ]


def test_secret_lines_leave_out_code_the_exercise_shows():
    # Exercise 3.2 hands out the code to repair; its unchanged lines are public, not leaks.
    secrets = leaks.secret_lines(nbtools.solution_notebooks())
    assert "h = jax.nn.relu(x @ w_in)" not in secrets
    assert 'return jnp.matmul(x, w, out_sharding=P("X", "Y"))' in secrets


def test_leak_check_catches_a_one_line_solution(tmp_path, monkeypatch):
    for name in ("solutions", "exercises"):
        shutil.copytree(ROOT / name, tmp_path / name)
    leaked = tmp_path / "exercises" / "03_explicit_sharding" / "03_explicit_sharding.ipynb"
    nb = nbformat.read(leaked, as_version=4)
    nb.cells.append(
        nbformat.v4.new_markdown_cell('Hint: `return jnp.matmul(x, w, out_sharding=P("X", "Y"))`')
    )
    nbformat.write(nb, leaked)
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    with pytest.raises(SystemExit):
        nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))


def test_leaks_in_reads_rendered_text():
    secrets = {'return jnp.matmul(x, w, out_sharding=P("X", "Y"))'}
    assert leaks.leaks_in("nothing here", secrets) == []
    # A browser may collapse runs of spaces; the marker is found too.
    found = leaks.leaks_in('return  jnp.matmul(x, w, out_sharding=P("X", "Y"))\n### BEGIN SOLUTION', secrets)
    assert len(found) == 2


def test_points_check_compares_prose_with_metadata():
    good = assignment_notebook(
        "Points: 7 in all.",
        [("### Exercise 7.1 — A (3 points)", [1, 2]), ("### Exercise 7.2 — B (4 points)", [1, 3])],
    )
    assert nbtools.points_problems(good, "a.ipynb") == ([], {"7.1": 3, "7.2": 4})
    # Assignment 7 as filed: the intro says 9, the headings 3 + 4, the metadata 7.
    intro_wrong = assignment_notebook(
        "Points: 9 in all.",
        [("### Exercise 7.1 — A (3 points)", [1, 2]), ("### Exercise 7.2 — B (4 points)", [1, 3])],
    )
    problems, _ = nbtools.points_problems(intro_wrong, "a.ipynb")
    assert problems == ["a.ipynb: the intro says 'Points: 9 in all'; the test cells' metadata sums to 7"]
    heading_wrong = assignment_notebook(
        "Points: 7 in all.",
        [("## Exercise 7.1 — A (4 points)", [1, 2]), ("## Exercise 7.2 — B (1 point)", [2])],
    )
    problems, _ = nbtools.points_problems(heading_wrong, "a.ipynb")
    assert len(problems) == 3 and "Exercise 7.1's heading says 4 points" in problems[1]
    no_intro = assignment_notebook("Hand in the notebook.", [("### Exercise 1.1 — A (3 points)", [1, 2])])
    assert "once (found 0 times)" in nbtools.points_problems(no_intro, "a.ipynb")[0][0]


def test_kernels_never_inherit_a_forced_matplotlib_backend(monkeypatch):
    # MPLBACKEND=Agg reaching a kernel turns every figure into "<Figure size ...>" text (issue 12).
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert "MPLBACKEND" not in nbtools._env()
    saved = dict(os.environ)
    try:
        nbtools._use_env()
        assert "MPLBACKEND" not in os.environ
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_claims_must_quote_the_prose():
    # A claim() checks a sentence of the page: its text must be a literal the prose contains word for
    # word (emphasis and code markup aside), so the check and the sentence cannot drift apart.
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("FSDP keeps *an eighth* of the\nmemory, and `psum` sends nothing."),
        nbformat.v4.new_code_cell(
            'claim("an eighth of the memory", a * 8 <= b)\nshardbook.claim("psum sends nothing", True)'
        ),
        nbformat.v4.new_code_cell('claim("a quarter of the memory", True)\nclaim(f"{x} faster", True)'),
    ]
    sentences, problems = prose.claimed_sentences(nb)
    assert sentences == ["an eighth of the memory", "psum sends nothing", "a quarter of the memory"]
    assert len(problems) == 2
    assert 'claim("a quarter of the memory") quotes words the prose lacks' in problems[0]
    assert "no string literal" in problems[1]


def test_a_false_claim_stops_the_page_quoting_its_sentence(capsys):
    from shardbook import ClaimFailed, checked_claims, claim

    claim("an eighth of the memory", 1.0 * 8 <= 8.0)
    # A claim that holds stays out of the reader's way: it prints nothing, and is listed on demand.
    assert capsys.readouterr().out == ""
    assert checked_claims()[-1] == "an eighth of the memory"
    with pytest.raises(ClaimFailed, match='(?s)the text says "an eighth of the memory".*FSDP 3.5 MiB'):
        claim("an eighth of the memory", 3.5 * 8 <= 1.4, because="FSDP 3.5 MiB, data parallel 1.4 MiB")
    # A value that is merely truthy is refused: a check that cannot fail is a defect.
    import numpy as np

    for not_a_boolean in ("yes", [1], np.ones(2) > 0, 1):
        with pytest.raises(TypeError):
            claim("anything", not_a_boolean)
    claim("a NumPy comparison", np.float32(2) > 1)


def test_a_broken_claim_fails_the_chapter_run_quoting_the_sentence(tmp_path, capsys, monkeypatch):
    # What CI's chapter run does when a change makes a sentence false: here FSDP "keeps" its gathered
    # weights (its memory no longer an eighth); the run stops and its message quotes the sentence.
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("FSDP keeps an eighth of the memory of data parallel."),
        nbformat.v4.new_code_cell(
            "from shardbook import claim\n"
            "fsdp, data_parallel = 3.5, 1.4  # MiB: FSDP saved every gathered layer\n"
            'claim("an eighth of the memory", fsdp * 8 <= data_parallel,\n'
            '      because=f"{fsdp} and {data_parallel} MiB")'
        ),
    ]
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    assert prose.claimed_sentences(nb) == (["an eighth of the memory"], [])
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)  # its executed copy goes to tmp_path/_build
    monkeypatch.setattr(nbtools, "_use_env", lambda: None)  # the kernel imports the installed shardbook
    # a cache of its own: the book's may be in use by the chapters' run beside this test
    cache = nbtools.execution_cache.open_cache(tmp_path / "cache")
    monkeypatch.setattr(nbtools.execution_cache, "open_cache", lambda: cache)
    # one at a time, and two at a time beside a notebook that passes (each in a worker process)
    fine = tmp_path / "fine.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")]), fine)
    for jobs, paths in ((1, [path]), (2, [fine, path])):
        run = types.SimpleNamespace(
            paths=[str(p) for p in paths], chapters=False, force=False, cell_timeout=120, jobs=jobs
        )
        with pytest.raises(SystemExit):
            nbtools.cmd_run(run)
        err = capsys.readouterr().err
        assert 'broken.ipynb: cell 1 raised ClaimFailed: the text says "an eighth of the memory"' in err
        assert "3.5 and 1.4 MiB" in err


def test_notebooks_run_two_at_a_time_and_each_is_timed(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    monkeypatch.setattr(nbtools, "_use_env", lambda: None)
    cache = nbtools.execution_cache.open_cache(tmp_path / "cache")
    monkeypatch.setattr(nbtools.execution_cache, "open_cache", lambda: cache)
    paths = []
    for name in ("a", "b", "c"):
        paths.append(tmp_path / f"{name}.ipynb")
        nbformat.write(
            nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"print('{name}' * 3)")]), paths[-1]
        )
    nbtools.cmd_run(
        types.SimpleNamespace(
            paths=[str(p) for p in paths], chapters=False, force=False, cell_timeout=120, jobs=2
        )
    )
    out = capsys.readouterr().out
    assert all(f" s  {n}.ipynb" in out for n in "abc") and "(3 notebooks; " in out and "2 at a time" in out
    for name in "abc":
        executed = nbformat.read(tmp_path / "_build" / "executed" / f"{name}.ipynb", as_version=4)
        assert executed.cells[0].outputs[0]["text"] == name * 3 + "\n"


def test_system_packages_are_installed_as_root_and_named_otherwise():
    # make test's first step: nothing to do when the programs are there; as root, apt-get installs
    # what is missing; otherwise the message names the packages and the one command to run.
    from tools import system_packages as sp

    everything = {"chromium", "bwrap", "pdftotext", "apt-get"}
    assert sp.ensure(which=lambda p: p if p in everything else None, is_root=False) == (True, "")

    ok, message = sp.ensure(which=lambda p: None, is_root=False)
    assert not ok and message.endswith("sudo apt-get install chromium bubblewrap poppler-utils")

    installed: set[str] = {"apt-get"}
    commands: list[list[str]] = []

    def apt(cmd):
        commands.append(cmd)
        if cmd[:2] == ["apt-get", "install"]:
            installed.update({"chromium-browser", "bwrap", "pdftotext"})
        return 0

    ok, message = sp.ensure(which=lambda p: p if p in installed else None, is_root=True, run=apt)
    assert ok and message == "installed chromium bubblewrap poppler-utils"
    packages = ["chromium", "bubblewrap", "poppler-utils"]
    assert commands == [["apt-get", "update", "-qq"], sp.install_command(packages)]
    # root, but apt-get cannot install: said, not hidden
    ok, message = sp.ensure(
        which=lambda p: "apt-get" if p == "apt-get" else None, is_root=True, run=lambda c: 100
    )
    assert not ok and "could not install chromium bubblewrap poppler-utils" in message


def test_system_packages_stop_in_seconds_naming_what_to_install(tmp_path):
    # The script as make test runs it, on a machine where neither program nor apt-get is on PATH.
    import subprocess
    import sys

    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "system_packages.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert "sudo apt-get install chromium bubblewrap poppler-utils" in run.stderr


def test_code_wider_than_the_page_is_found():
    # A code line over 88 columns is cut at the page's right edge, in a code cell or in a code block
    # fenced in prose; the prose itself (and a directive such as a list-table) may be any width.
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("x" * 200 + "\n```{list-table}\n" + "y" * 100 + "\n```"),
        nbformat.v4.new_code_cell("a = 1\n" + "b = " + "1" * 85 + "\nc = " + "1" * 84),
        nbformat.v4.new_markdown_cell("z" * 100 + "\n```python\nshort\n" + "w" * 90 + "\n```\n" + "v" * 100),
    ]
    assert nbtools.wide_code_lines(nb) == ["cell 1, line 2: 89 columns", "cell 2, line 4: 90 columns"]
    assert nbtools.wide_code_lines(nb, width=100) == []


def test_every_source_fits_the_page():
    # The rule holds for the sources as committed (hygiene fails otherwise).
    for source in nbtools.notebook_sources():
        assert nbtools.wide_code_lines(nbtools._read_source(source)) == [], source


def test_chapter_map_is_drawn_from_the_sources_and_the_intro_agrees():
    # The landing page's picture is what tools/chapter_map.py draws now, and the minutes in the
    # intro's table are the picture's (both estimated from the chapters' sources).
    import re

    from tools import chapter_map

    for kind, text in (("wide", chapter_map.draw()), ("phone", chapter_map.draw_phone())):
        assert chapter_map.TARGETS[kind].read_text() == text, "run python tools/chapter_map.py"
    intro = (ROOT / "book" / "intro.md").read_text()
    stated = dict(re.findall(r"^\| \[[^\]]+\]\(([0-9a-z_]+)\.ipynb\) \| (\d+) min \|", intro, re.M))
    assert {stem for _, stem, _, _ in chapter_map.CHAPTERS.values()} <= set(stated)
    for stem, minutes in stated.items():
        assert int(minutes) == chapter_map.minutes(stem), stem
    # The picture's alt text gives the range the boxes show.
    low, high = (int(m) for m in re.search(r"the chapter's time, (\d+) to (\d+) minutes", intro).groups())
    boxes = [chapter_map.minutes(stem) for _, stem, _, _ in chapter_map.CHAPTERS.values()]
    assert (low, high) == (min(boxes), max(boxes))
    # Every chapter of the book is in the picture, and every arrow joins two of them.
    drawn = {stem for _, stem, _, _ in chapter_map.CHAPTERS.values()}
    assert drawn == {p.stem for p in nbtools.chapter_sources() if p.stem[:2].isdigit()}
    assert all(a in chapter_map.CHAPTERS and b in chapter_map.CHAPTERS for a, b in chapter_map.NEEDS)


def test_a_notebook_run_that_leaves_a_process_or_a_file_behind_is_named(tmp_path):
    # Property: what `notebooks.py run` checks after each notebook: a process started from the run (its
    # environment names the run's TMPDIR) still alive, and any file left in that folder, are named;
    # once the process ended and the file went, nothing is.
    import subprocess
    import sys

    scratch = tmp_path / "run"
    scratch.mkdir()
    (scratch / "shardbook-hosts-x").mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ, TMPDIR=str(scratch))
    )
    try:
        left = nbtools.left_behind(scratch, settle=0.5)
        assert left == [f"process {child.pid} still running", "shardbook-hosts-x in its temporary folder"]
    finally:
        child.kill()
        child.wait()
    (scratch / "shardbook-hosts-x").rmdir()
    assert nbtools.left_behind(scratch, settle=0.5) == []


def test_the_machines_busy_time_counts_this_process_too():
    # make test's table adds the machine's busy CPU time over the run (/proc/stat), which counts every
    # process: at least what this one burns in between, whatever else the machine is doing.
    from tools import run_steps

    busy, idle = run_steps.machine_cpu()
    if busy + idle == 0:
        pytest.skip("no /proc/stat on this system")
    mine = time.process_time()
    while time.process_time() - mine < 0.3:
        pass
    burnt = time.process_time() - mine
    after, _ = run_steps.machine_cpu()
    assert after - busy >= burnt - 0.05  # /proc/stat counts in ticks of 10 ms


ORPHANS_SCRIPT = """
import json, resource, subprocess, sys
from tools import run_steps
assert run_steps.adopt_orphans()
burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.5: pass"
# Two orphans (their shell ends at once): one burns 0.5 s of CPU and ends, one would sleep forever.
subprocess.run(["sh", "-c", f"{sys.executable} -c '{burn}' & exec sleep 0"], check=True)
subprocess.run(["sh", "-c", "exec 0<&- 1>&- 2>&-; sleep 600 &"], check=True)
before = resource.getrusage(resource.RUSAGE_CHILDREN)
reaped, killed = run_steps.reap_orphans(grace=3)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
total = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print(json.dumps({"reaped": reaped, "killed": killed, "cpu": total}))
"""


def test_orphans_are_adopted_counted_and_the_ones_left_running_killed():
    # make test's "all" counts processes whose parent ended before them (a sandboxed kernel's bwrap, a
    # Ray node's raylet and workers): run_steps adopts them, waits for them at the end, and kills, by
    # name, those still running then. In a process of its own: pytest must not become a subreaper.
    if not sys.platform.startswith("linux"):
        pytest.skip("a child subreaper is Linux's")
    done = subprocess.run(
        [sys.executable, "-c", ORPHANS_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    # the burner ended by itself, the sleeper was killed; each counted under its name, with its CPU
    (burner,) = [name for name in got["reaped"] if name != "sleep"]
    assert got["reaped"]["sleep"][0] == 1 and got["reaped"][burner][0] == 1, got
    assert got["killed"] == ["sleep"] and got["cpu"] >= got["reaped"][burner][1] >= 0.45, got


def test_the_cores_speed_is_this_process_cpu_time_for_fixed_work(monkeypatch):
    # make test's table prints core_seconds before and after the lanes: the CPU time (not the wall
    # time) of fixed work, so what else the machine runs does not enter it
    from tools import run_steps

    clock = iter([5.0, 7.5])
    monkeypatch.setattr(run_steps.time, "process_time", lambda: next(clock))
    assert run_steps.core_seconds(1000) == 2.5


def test_tpu_cache_prune_keeps_what_a_run_used(tmp_path, monkeypatch):
    # property: a run notes each program it compiled or read (SHARDBOOK_TPU_USED); prune keeps exactly
    # those entries, and refuses to empty the cache from a list that names nothing
    import jax
    import jax.numpy as jnp

    from shardbook import tpu
    from tools import tpu_cache

    folder, used = tmp_path / "cache", tmp_path / "used.txt"
    monkeypatch.setenv("SHARDBOOK_TPU_CACHE", str(folder))

    def build(devices, n):
        one = jax.sharding.SingleDeviceSharding(devices[0])
        return jax.jit(jnp.sin), (jax.ShapeDtypeStruct((n,), jnp.float32, sharding=one),)

    old = tpu.compile_for_tpu(lambda d: build(d, 8), "v5e-1")
    monkeypatch.setenv(tpu.USED_LOG_VARIABLE, str(used))
    new = tpu.compile_for_tpu(lambda d: build(d, 16), "v5e-1")  # also notes the HBM probe
    assert len(list(folder.glob("*.json.gz"))) == 3
    assert tpu_cache.prune(used, folder) == (2, 1)
    assert not (folder / f"{old.fingerprint}.json.gz").exists()
    assert (folder / f"{new.fingerprint}.json.gz").exists()
    used.write_text("")
    with pytest.raises(SystemExit, match="lists no program: nothing pruned"):
        tpu_cache.prune(used, folder)


RESTORE_SOLUTION = """\
    def target(meta):
        spec = P(*meta.sharding.partition_spec)
        return jax.ShapeDtypeStruct(
            meta.shape, meta.dtype, sharding=NamedSharding(mesh, spec),
        )
"""


def test_a_solution_statement_is_found_whatever_its_layout():
    # Property: a statement a formatter broke over lines is a secret read whole (its first line,
    # `return jax.ShapeDtypeStruct(`, is generic alone), found in a page that lays it out otherwise
    # (one line, no trailing comma, other indentation). Generic lines, or the same call with other
    # arguments (teaching the API, not the answer), are no leak.
    secrets = leaks.secret_lines_of([RESTORE_SOLUTION])
    statement = "return jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, spec))"
    assert statement in secrets
    assert "return jax.ShapeDtypeStruct(" not in secrets
    assert leaks.leaks_in(f"A chapter:\n\n```python\n{statement}\n```\n", secrets)
    not_the_return = "t = lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=NamedSharding(mesh, s))"
    assert leaks.leaks_in(not_the_return, secrets) == []
    assert leaks.leaks_in("def f():\n    return jax.ShapeDtypeStruct(\n        shape, dtype)", secrets) == []
    teaching = 'jax.ShapeDtypeStruct((8, 16), np.float32, sharding=NamedSharding(small_mesh, P("X", "Y")))'
    assert leaks.leaks_in(teaching, secrets) == []


def test_a_run_of_generic_solution_lines_is_a_secret():
    # Property: three consecutive lines, each too short to count, are a solution's together; one of
    # them alone, or the same lines apart, is no leak.
    block = "    m = x.max()\n    e = jnp.exp(x - m)\n    return e / e.sum()\n"
    secrets = leaks.secret_lines_of([block])
    assert all(leaks.secret_texts(line) == [] for line in block.splitlines())
    assert leaks.leaks_in(
        "def softmax(x):\n  m = x.max()\n  e = jnp.exp(x - m)\n  return e / e.sum()", secrets
    )
    assert leaks.leaks_in("e = jnp.exp(x - m)", secrets) == []
    assert leaks.leaks_in("m = x.max()\nprint(m)\ne = jnp.exp(x - m)\nreturn e / e.sum()", secrets) == []
    assert leaks.secret_lines_of(["    return out\n    pass\n"]) == set()


def test_leak_check_reads_the_chapters(tmp_path, monkeypatch, capsys):
    # A chapter that shows a solution's statement, laid out otherwise, fails `leaks` even before the
    # site is built; the chapters as they are pass.
    for name in ("solutions", "exercises", "book"):
        shutil.copytree(ROOT / name, tmp_path / name)
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))
    chapter = tmp_path / "book" / "12_many_hosts.md"
    chapter.write_text(
        chapter.read_text()
        + "\n```{code-cell}\ndef target(meta):\n    return jax.ShapeDtypeStruct(meta.shape, meta.dtype,"
        " sharding=NamedSharding(mesh, spec))\n```\n"
    )
    with pytest.raises(SystemExit):
        nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))
    err = capsys.readouterr().err
    assert "book/12_many_hosts.md: solution/hidden line 'return jax.ShapeDtypeStruct(" in err
