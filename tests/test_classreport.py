"""grading/classreport.py: the class report agrees with scores.csv, renders in Chromium at both widths,
and stays fast and readable for 300 learners.

The class is built as write_reports keeps it (learners/*.json), from assignment 1's committed wrong
answers and the reference solution, in a scratch course: no notebook is graded here. The end-to-end
run is tests/test_grading.py's batch (tests/conftest.py: graded_batch), which holds this module's late,
copied and crashed learners and its course file; test_make_grade_writes_the_class_report reads it.
"""

import csv
import html
import json
import random
import re
import time

import nbformat
import pytest

from grading import classreport, pagesafe, reports, worker
from grading.course import read_course
from grading.record import LearnerRecord
from tests import pages, submissions
from tests.test_similarity import PER_DEVICE_SHAPE_A, PER_DEVICE_SHAPE_A_COPIED

ASSIGNMENT = "01_meshes"
AXIS_MESSAGE = "AssertionError: expected P('X', 'Y'), got P('Y', 'X'): the first mesh axis is the major one"


def _record(learner: str, scores: dict, *, messages=None, answers=None, notes=None) -> dict:
    return {
        "learner": learner,
        "source": f"{learner}.ipynb",
        "scores": scores,
        "notes": notes or [],
        "seconds": 12.5,
        "messages": messages or {},
        "answers": answers or {},
        "submitted": None,
        "submitted_from": None,
    }


def _class(cells: list[tuple[str, float]]) -> list[dict]:
    """Right, wrong, copied, crashed and unreadable learners of assignment 1, as kept JSON: the copier
    handed in ada's own per_device_shape renamed and re-commented, and the committed wrong axis order."""
    full = dict(cells)
    reference = submissions.solution_answers(ASSIGNMENT)
    wrong = submissions.load(ASSIGNMENT)["wrong_axis_order"]
    lost = wrong.lost(list(full))
    wrong_answers = reference | wrong.answers
    own = reference | {"per_device_shape": PER_DEVICE_SHAPE_A}  # ada's own answer ...
    copied = wrong_answers | {"per_device_shape": PER_DEVICE_SHAPE_A_COPIED}  # ... copied, renamed
    axis_messages = dict.fromkeys(lost, AXIS_MESSAGE)
    kernel = "RuntimeError: this cell stopped the Python kernel and was skipped"
    crashed_lost = {g for g in full if g.startswith("test_shard_sums")}
    return [
        _record("ada", full, answers=own),
        _record("grace", full, answers=reference),
        _record(
            "wrong_axis_order", full | dict.fromkeys(lost, 0.0), messages=axis_messages, answers=wrong_answers
        ),
        _record("copier", full | dict.fromkeys(lost, 0.0), messages=axis_messages, answers=copied),
        _record(
            "crashed",
            full | dict.fromkeys(crashed_lost, 0.0),
            messages=dict.fromkeys(crashed_lost, kernel),
            answers=reference,
            notes=[
                "cell 17 (test_shard_sums_visible) stopped the Python kernel; it was skipped and graded again"
            ],
        ),
        _record(
            "unreadable",
            dict.fromkeys(full, 0.0),
            notes=["the file is not a readable notebook (JSONDecodeError: Expecting value); scored 0."],
        ),
    ]


def _write(tmp_path, records: list[dict]):
    root = worker.copy_course(tmp_path, assignment=ASSIGNMENT)
    folder = root / "grading" / "reports" / ASSIGNMENT / "learners"
    folder.mkdir(parents=True)
    for r in records:
        (folder / f"{r['learner']}.json").write_text(json.dumps(r))
    (folder.parent / "feedback").mkdir()
    (folder.parent / "feedback" / "ada.html").write_text("<p>ada's feedback</p>")
    return reports.write_reports(ASSIGNMENT, [], root)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("classreport")
    cells = worker.graded_cells(ASSIGNMENT)
    records = _class(cells)
    return _write(tmp, records), records, cells


def _csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _never_ran(folder) -> set[str]:
    """The learners whose kept JSON holds no answer and no message: their notebook never ran."""
    kept = [json.loads(p.read_text()) for p in (folder / "learners").glob("*.json")]
    return {k["learner"] for k in kept if not k.get("answers") and not k.get("messages")}


def check_against_scores_csv(folder, cells) -> None:
    """Pass rates and message counts of the class report equal what scores.csv and the kept JSON say; a
    notebook that never ran is out of every pass rate."""
    scores = _csv(folder / "scores.csv")
    never = _never_ran(folder)
    ran = [row for row in scores if row["learner"] not in never]
    tests = {row["grade_id"]: row for row in _csv(folder / "class_tests.csv")}
    assert list(tests) == [gid for gid, _ in cells]
    messages = _csv(folder / "class_messages.csv")
    for gid, points in cells:
        passed = sum(1 for row in ran if float(row[gid]) >= points)
        assert (int(tests[gid]["passed"]), int(tests[gid]["learners"])) == (passed, len(ran)), gid
        assert int(tests[gid]["not_run"]) == len(never), gid
        assert float(tests[gid]["pass_rate"]) == pytest.approx(passed / len(ran), abs=1e-4)
        failed = {row["learner"] for row in scores if float(row[gid]) < points}
        mine = [m for m in messages if m["grade_id"] == gid]
        assert sum(int(m["count"]) for m in mine) == len(failed), gid
        assert {name for m in mine for name in m["learners"].split()} == failed, gid
        for m in mine:  # each message's learners are the ones whose kept JSON holds it
            kept = {
                n
                for n in m["learners"].split()
                if json.loads((folder / "learners" / f"{n}.json").read_text())["messages"].get(gid)
                == m["message"]
            }
            assert kept == set(m["learners"].split()) or m["message"] == classreport.NOT_GRADED, m
    histogram = _csv(folder / "class_histogram.csv")
    assert sum(int(row["learners"]) for row in histogram) == len(scores)


def test_pass_rates_and_message_counts_agree_with_scores_csv(report):
    folder, _, cells = report
    check_against_scores_csv(folder, cells)
    rows = {(m["grade_id"], m["message"]): m for m in _csv(folder / "class_messages.csv")}
    lost = submissions.load(ASSIGNMENT)["wrong_axis_order"].lost([g for g, _ in cells])
    for gid in lost:
        assert rows[gid, AXIS_MESSAGE]["learners"] == "copier wrong_axis_order"


def test_zero_scores_say_why(report):
    text = html.unescape((report[0] / "class.html").read_text())
    assert re.search(
        r"unreadable</td><td class='message'>unreadable: the file is not a readable notebook", text
    )
    assert "crashed</td>" not in text.split("id='zeros'")[1].split("<h2")[0]  # 0 on two tests, not overall


def test_copied_answer_is_listed_with_a_side_by_side_diff(report):
    folder = report[0]
    pairs = _csv(folder / "class_similarity.csv")
    assert [(p["learner_a"], p["learner_b"], p["exercise"]) for p in pairs] == [
        ("ada", "copier", "per_device_shape")
    ]
    page = (folder / "class.html").read_text()
    assert '<table class="diff"' in page and "ada and copier" in page


def test_class_report_renders_at_desktop_and_phone_widths(report, tmp_path):
    # The book's site check sizes: both pictures load and fit, nothing scrolls the page sideways, and the
    # learner table sorts by a click on a heading, in the page alone (the file opened offline).
    def check(page, viewport, width):
        for image in ("#histogram", "#pass-rates"):
            facts = page.eval_on_selector(
                image,
                "img => ({loaded: img.complete && img.naturalWidth > 0, alt: img.alt,"
                " width: img.getBoundingClientRect().width,"
                " height: img.getBoundingClientRect().height})",
            )
            assert facts["loaded"] and facts["alt"], (viewport, image, facts)
            assert 0.5 * min(width, 700) < facts["width"] <= width and facts["height"] > 50, (viewport, facts)
        first_column = "t => Array.from(t.tBodies[0].rows).map(r => r.cells[0].innerText)"
        score_column = "t => Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[1].innerText))"
        scores = page.eval_on_selector("#learner-table", score_column)
        assert scores == sorted(scores) and len(scores) == 6, scores  # lowest score first
        page.click("#learner-table th:nth-child(1)")  # by name, A to Z
        names = page.eval_on_selector("#learner-table", first_column)
        assert names == sorted(names), names
        page.click("#learner-table th:nth-child(2)")
        page.click("#learner-table th:nth-child(2)")  # by score, highest first
        scores = page.eval_on_selector("#learner-table", score_column)
        assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1], scores

    pages.at_both_widths(report[0] / "class.html", check, shots=tmp_path)


def test_on_a_phone_every_learners_flags_and_feedback_link_are_on_the_screen(tmp_path):
    # The issue: at 390 px the learner table ran past the screen's edge, its flags and links out of
    # sight. A class with Canvas-long names, late learners (the exported and days-late columns) and
    # several flags per row: each row's flags and link end inside the window at both widths.
    cells = worker.graded_cells(ASSIGNMENT)
    records = _class(cells)
    for r in records:
        r["learner"] = f"lovelaceada_LATE_424242_991199_{r['learner']}_01_meshes"
        r["submitted"], r["submitted_from"] = "2026-10-03T08:00:00+00:00", "times.csv"
        r["notes"].append("test_shard_sums_hidden ran past the 120 s cell limit and was interrupted.")
    root = worker.copy_course(tmp_path, assignment=ASSIGNMENT)
    (root / "grading" / "course.toml").write_text(
        "[late]\nper_day = 10\n[assignments.01_meshes]\ndue = 2026-10-01T23:59:00Z\n"
    )
    folder = root / "grading" / "reports" / ASSIGNMENT
    (folder / "learners").mkdir(parents=True)
    (folder / "feedback").mkdir()
    for r in records:
        (folder / "learners" / f"{r['learner']}.json").write_text(json.dumps(r))
        (folder / "feedback" / f"{r['learner']}.html").write_text("<p>a page</p>")
    reports.write_reports(ASSIGNMENT, [], root, course=read_course(root / "grading" / "course.toml"))

    def check(page, viewport, width):
        rows = page.eval_on_selector(
            "#learner-table",
            "t => Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).slice(-2).map("
            " c => [c.getBoundingClientRect().right, c.innerText]))",
        )
        assert len(rows) == len(records)
        heads = page.eval_on_selector_all(
            "#learner-table th", "hs => hs.map(h => h.getBoundingClientRect().right)"
        )
        assert max(heads) <= width, (viewport, heads)
        for row in rows:
            for right, text in row:
                assert right <= width and text.strip(), (viewport, row)

    pages.at_both_widths(folder / "class.html", check, shots=tmp_path)


def test_the_class_report_runs_its_sorting_script_and_no_other(report):
    # Its CSP allows the one inline script by its hash: a learner id or message can never become script.
    page = (report[0] / "class.html").read_text()
    assert page.count("<script>") == 1
    script = page.split("<script>")[1].split("</script>")[0]
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)[1]
    assert f"script-src {pagesafe.script_hash(script)};" in policy and "default-src 'none'" in policy


def test_learner_table_names_everyone_with_flags_and_a_link_to_their_feedback(report):
    # Each learner has a row; a link to feedback/<learner>.html where that page exists; the flags say who
    # never ran, who scored 0, whose cell stopped the kernel, and who looks alike.
    folder, records, _ = report
    page = (folder / "class.html").read_text()
    table = page.split("id='learner-table'")[1].split("</table>")[0]
    rows = {re.search(r"<td data-sort='([^']+)'>", r).group(1): r for r in table.split("<tr>")[2:]}
    assert set(rows) == {r["learner"] for r in records}
    assert "href='feedback/ada.html'" in rows["ada"]  # the fixture writes ada's page
    assert "href=" not in rows["grace"] and "none (see report.txt)" in rows["grace"]
    assert ">never ran<" in rows["unreadable"] and ">cell cut off<" in rows["crashed"]
    assert ">alike: copier<" in rows["ada"] and ">alike: ada<" in rows["copier"]
    assert ">never ran<" not in rows["ada"] and ">alike" not in rows["grace"]


def test_a_cell_cut_off_by_any_limit_is_flagged_and_a_pair_of_learners_once():
    # Every way a cell is stopped (the kernel died, a time limit, the memory cap) flags the learner; two
    # learners alike in several exercises get one flag each, naming the exercises in its title.
    from types import SimpleNamespace

    from grading import classpage

    pair = SimpleNamespace(a="ada", b="copier", score=0.9)
    summary = SimpleNamespace(
        not_run=[],
        zeros={},
        late={},
        notes={
            "slow": ["test_x_hidden ran past the 120 s cell limit and was interrupted."],
            "hog": ["test_x_visible ran out of memory (the cap is 6 GiB per notebook)."],
            "ada": ["2 cells define f; graded the one run last"],
            "hooked": [
                "the notebook changed how IPython runs cells (an input transformer); undone "
                "before each test.",
                "test_x_visible gave no proof that its checks ran (an earlier cell changed how "
                "cells run); scored 0.",
            ],
        },
        pairs=[pair, SimpleNamespace(**{**vars(pair), "exercise": "g"})],
    )
    pair.exercise = "f"
    for learner in ("slow", "hog"):
        assert ">cell cut off<" in classpage._flags(summary, learner)[0], learner
    hooked, _ = classpage._flags(summary, "hooked")
    assert ">tests interfered<" in hooked and "input transformer" in hooked
    flags, text = classpage._flags(summary, "ada")
    assert "cell cut off" not in text and "tests interfered" not in text
    assert text.count("alike: copier") == 1
    assert "alike in f 90%, g 90%" in flags


def test_hardest_test_first_and_never_ran_counted_apart(report):
    # The page's test table and the bars go hardest first; the unreadable notebook is out of the rates
    # (5 ran of 6) and named apart.
    folder, _, cells = report
    tests = {row["grade_id"]: row for row in _csv(folder / "class_tests.csv")}
    page = (folder / "class.html").read_text()
    listed = re.findall(
        r"<tr><td><code>(\w+)</code></td>", page.split("id='tests-table'")[1].split("</table>")[0]
    )
    rates = [float(tests[g]["pass_rate"]) for g in listed]
    assert sorted(listed) == sorted(g for g, _ in cells) and rates == sorted(rates) and rates[0] < 1
    assert {row["learners"] for row in tests.values()} == {"5"} and {
        r["not_run"] for r in tests.values()
    } == {"1"}
    hardest = listed[0]
    assert f"Hardest test: <code>{hardest}</code>" in page
    assert "Notebooks that never ran (1)" in page


def test_one_mistake_in_several_tests_and_numbers_is_one_row():
    # Two learners, the same mistake on a visible and a hidden test with other sizes: one row (2 learners,
    # 2 tests); a message that differs in a PartitionSpec stays apart.
    def record(learner, messages):
        return _record(learner, dict.fromkeys(messages, 0.0), messages=messages, answers={"f": "x"})

    visible = "CheckFailed: expected device 1 to hold [8:10], got [2:4] from your P(('X', 'Y'),)."
    hidden = "CheckFailed: expected device 3 to hold [24:32], got [6:8] from your P(('X', 'Y'),)."
    other = "CheckFailed: expected device 3 to hold [24:32], got [6:8] from your P('X',)."
    records = [
        record("a", {"test_f_visible": visible, "test_f_hidden": hidden}),
        record("b", {"test_f_hidden": other}),
    ]
    cells = [("test_f_visible", 1.0), ("test_f_hidden", 1.0)]
    summary = classreport.summarise("x", [LearnerRecord.from_dict(r) for r in records], cells, ["f"], {})
    rows = [(m.key, m.learners, m.tests) for m in summary.mistakes]
    assert rows[0] == (
        "CheckFailed: expected device # to hold [#:#], got [#:#] from your P(('X', 'Y'),).",
        ["a"],
        ["test_f_visible", "test_f_hidden"],
    )
    assert rows[1][1:] == (["b"], ["test_f_hidden"]) and len(rows) == 2
    assert classreport.mistake_key("f32[8,4] on x_block2") == "f32[#,#] on x_block2"


def test_a_check_quoting_the_learners_error_joins_that_errors_row():
    # The graded batch's NameError: raw on the visible test, quoted by the hidden test's check.
    raw = "NameError: name 'math' is not defined"
    quoted = f"CheckFailed: per_device_shape((8,), {{'X': 8}}): expected a result, got {raw}. Hint: read it."
    records = [
        _record(
            n,
            {"test_f_visible": 0.0, "test_f_hidden": 0.0},
            answers={"f": "x"},
            messages={"test_f_visible": raw, "test_f_hidden": quoted},
        )
        for n in ("copier", "original")
    ]
    summary = classreport.summarise(
        "x",
        [LearnerRecord.from_dict(r) for r in records],
        [("test_f_visible", 1.0), ("test_f_hidden", 1.0)],
        ["f"],
        {},
    )
    assert [(m.key, m.learners, m.tests) for m in summary.mistakes] == [
        (raw, ["copier", "original"], ["test_f_visible", "test_f_hidden"])
    ]


def generated_class(n: int, cells: list[tuple[str, float]], seed: int = 0) -> list[dict]:
    """``n`` learners of assignment 1 as kept JSON: the reference and committed wrong answers mixed,
    a few copies with renamed variables, and a few unreadable files."""
    rng = random.Random(seed)
    reference = submissions.solution_answers(ASSIGNMENT)
    wrongs = list(submissions.answer_only(ASSIGNMENT).values())
    full = dict(cells)
    records = []
    for k in range(n):
        name = f"learner_{k:03d}"
        if k % 50 == 7:
            records.append(
                _record(name, dict.fromkeys(full, 0.0), notes=["not a readable notebook; scored 0."])
            )
            continue
        answers, scores, messages = dict(reference), dict(full), {}
        for wrong in rng.sample(wrongs, rng.randint(0, len(wrongs))):
            answers |= wrong.answers
            for gid in wrong.lost(list(full)):
                scores[gid] = 0.0
                messages[gid] = f"AssertionError: {wrong.name} (variant {rng.randint(0, 3)})"
        for gid in answers:  # each learner's own variable names: nothing in common but the reference
            answers[gid] = answers[gid].replace("names", f"names_{k}") + f"\n# learner {k}\n"
        records.append(_record(name, scores, messages=messages, answers=answers))
    return records


def test_300_learners_in_reasonable_time_and_readable(tmp_path):
    # The scale the issue asks for: 300 learners' kept results to a class report. Its CPU time is
    # bounded, not its wall time (which a busy machine stretches); it is all in this process.
    cells = worker.graded_cells(ASSIGNMENT)
    start, cpu = time.monotonic(), time.process_time()
    folder = _write(tmp_path, generated_class(300, cells))
    seconds, cpu = time.monotonic() - start, time.process_time() - cpu
    print(f"class report of 300 learners: {seconds:.1f} s, {cpu:.1f} s of CPU")
    assert cpu < 60
    check_against_scores_csv(folder, cells)
    page = (folder / "class.html").read_text()
    assert len(page) < 2_000_000  # learner lists fold away, pairs beyond SHOWN_PAIRS stay in the CSV
    assert page.count("<details class='pair'>") <= classreport.SHOWN_PAIRS


@pytest.mark.xdist_group("grading")  # reads the session's `make grade` batch (see CONTRIBUTING.md)
def test_make_grade_writes_the_class_report(graded_batch):
    # The batch: right, wrong, late, crashed, unreadable and copied notebooks, a course file
    # with a due date, a grace period and an extension, and the LMS's submission times
    # (tests/conftest.py: CLASS_LEARNERS, COURSE_TOML, TIMES_CSV).
    folder = graded_batch.reports
    cells = worker.graded_cells(ASSIGNMENT, graded_batch.course)
    check_against_scores_csv(folder, cells)

    scores = {row["learner"]: row for row in _csv(folder / "scores.csv")}
    late = {k: (row["days_late"], float(row["total"]) - float(row["adjusted"])) for k, row in scores.items()}
    max_score = sum(p for _, p in cells)
    assert late["wrong_axis_order"] == ("2", pytest.approx(0.2 * max_score))
    assert {k for k, (days, _) in late.items() if days != "0"} == {"wrong_axis_order"}
    messages = _csv(folder / "class_messages.csv")
    axis = [m for m in messages if "the first mesh axis is the major one" in m["message"]]
    assert axis and all(m["learners"] == "wrong_axis_order" for m in axis)
    assert any(m["learners"] == "broken_kills_kernel" and "kernel" in m["message"] for m in messages)
    pairs = [(p["learner_a"], p["learner_b"], p["exercise"]) for p in _csv(folder / "class_similarity.csv")]
    # The copier and the learner they copied; the batch's other alike answers are alike indeed: the two
    # Colab learners' answers each call the same helper of their own, and a mangled notebook keeps the
    # very per_device_shape of wrong_tuple_entries. No one else is flagged.
    colab = ("colab_learner_after", "colab_learner_before")
    assert pairs == [
        *[(*colab, exercise) for exercise in sorted(submissions.solution_answers(ASSIGNMENT))],
        ("copier", "original", "per_device_shape"),
        ("mangled_tests_deleted_or_edited", "wrong_tuple_entries", "per_device_shape"),
    ]
    page = html.unescape((folder / "class.html").read_text())
    assert "broken_truncated_file</td><td class='message'>unreadable:" in page
    assert "the LMS's submission times (times.csv)" in page
    kept = json.loads((folder / "learners" / "wrong_axis_order.json").read_text())
    assert kept["submitted"] == "2026-10-03T08:00:00+00:00" and kept["answers"]["sharding_for_layout"]


def test_only_the_graded_notebook_feeds_the_class_report():
    # The autograded folder also holds what the learner's code wrote beside the notebook: a notebook of
    # its own making, named to sort first, must not stand in for the graded one.
    def notebook(message: str) -> bytes:
        test = nbformat.v4.new_code_cell("check()")
        test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_x", "points": 1}
        test.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue=message, traceback=[])]
        return nbformat.writes(nbformat.v4.new_notebook(cells=[test])).encode()

    files = {"00_planted.ipynb": notebook("all fine"), "a.ipynb": notebook("expected 3, got 4")}
    kept = classreport.kept_details(files, {"test_x": 0.0}, [("test_x", 1.0)], "a.ipynb")
    assert kept["messages"] == {"test_x": "CheckFailed: expected 3, got 4"}


def test_a_jax_error_is_counted_by_the_sentence_the_learner_read():
    # The class report groups learners by what their feedback page (and Colab) said: a known JAX
    # mistake's translated sentence, not the first line of JAX's own message.
    from shardbook.errors import error_lines

    raw = "ShardingTypeError: dot_general operation with inputs: f32[8@X,4@Y], f32[4@Y,2] produces an\n..."
    test = nbformat.v4.new_code_cell("check()")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_x", "points": 1}
    test.outputs = [nbformat.v4.new_output("error", ename="ShardingTypeError", evalue=raw, traceback=[])]
    notebook = nbformat.writes(nbformat.v4.new_notebook(cells=[test])).encode()
    kept = classreport.kept_details({"a.ipynb": notebook}, {"test_x": 0.0}, [("test_x", 1.0)], "a.ipynb")
    sentence = error_lines("ShardingTypeError", raw)[0]
    assert kept["messages"] == {"test_x": sentence}
    assert "ambiguous" in sentence and "dot_general" not in sentence


def _mistakes_of(messages_by_learner: dict[str, dict[str, str]]):
    records = [
        LearnerRecord(n, scores=dict.fromkeys(m, 0.0), messages=m, answers={"f": "x"})
        for n, m in messages_by_learner.items()
    ]
    cells = [("test_f_visible", 1.0), ("test_f_hidden", 1.0)]
    return classreport.summarise("x", records, cells, ["f"], {})


def test_a_small_class_s_headline_says_a_tie_and_never_picks_one_learner_s_mistake():
    # The issue: five learners, five different mistakes; the headline named one of them "commonest".
    from grading import classpage

    five = {
        f"l{k}": {"test_f_visible": f"CheckFailed: mistake number {'abcde'[k]} happened."} for k in range(5)
    }
    said = classpage.headline(_mistakes_of(five))
    assert "No two learners made the same mistake: 5 mistake(s)" in said and "Commonest mistake:" not in said
    tied = {n: {"test_f_visible": f"CheckFailed: the {'ab'[k % 2]} mistake."} for k, n in enumerate("pqrs")}
    said = classpage.headline(_mistakes_of(tied))
    assert (
        "2 mistakes are the commonest, each made by 2 learners" in said and "Commonest mistake:" not in said
    )
    tied["t"] = {"test_f_visible": "CheckFailed: the a mistake."}
    assert "Commonest mistake: <span class='message'>CheckFailed: the a mistake.</span>, made by 3" in (
        classpage.headline(_mistakes_of(tied))
    )


def test_a_long_message_is_cut_at_a_word_and_keeps_its_hint_whole():
    hint = "Hint: check which mesh axis comes first in the tuple; ('X', 'Y') is not ('Y', 'X')."
    message = "CheckFailed: f(x): expected " + ", ".join(
        f"device {k} to hold [{k}:{k + 1}]" for k in range(40)
    )
    line = classreport.first_line(f"{message}, got nothing. {hint}")
    assert line.endswith("… " + hint) and len(line) <= classreport.MESSAGE_CHARS
    kept = line.split("…")[0]
    assert message.startswith(kept) and message[len(kept)] == " ", line  # the cut falls between words


def test_a_check_s_visible_and_hidden_wording_of_one_mistake_is_one_row():
    # A self-check and a hidden test of one function fail with other arguments, shapes and specs but the
    # same hint: one mistake, two tests, both learners.
    hint = " Hint: within a tuple entry the first mesh axis is the major one."
    visible = "CheckFailed: sharding_for_layout(Mesh({'X': 4, 'Y': 2}), (16,)): expected device 1 to hold"
    hidden = "CheckFailed: sharding_for_layout(Mesh({'X': 2, 'Y': 4}), (8, 8)): expected P(('Y', 'X'), None)"
    summary = _mistakes_of(
        {
            "ada": {"test_f_visible": visible + " [8:10], got [2:4]." + hint},
            "bob": {"test_f_hidden": hidden + ", got P(('X', 'Y'), None)." + hint},
        }
    )
    assert [(m.learners, m.tests, len(m.messages)) for m in summary.mistakes] == [
        (["ada", "bob"], ["test_f_visible", "test_f_hidden"], 2)
    ]


def test_a_failing_message_keeps_no_control_character_of_the_learners():
    # Property: the one-line message kept for the class report and the LMS comment spells out what the
    # learner's error carried (an escape sequence that would erase a line of the report, a reversal).
    from grading.classsummary import failing_messages

    cell = nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {"grade_id": "test_f", "grade": True}})
    evalue = "f(2): expected 1, got \x1b[2K\x1b[1A\u202e14 of 14"
    cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue=evalue, traceback=[])]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    found = failing_messages(notebook, {"test_f": 0.0}, [("test_f", 1.0)])
    assert found == {"test_f": "CheckFailed: f(2): expected 1, got \\x1b[2K\\x1b[1A\\u202e14 of 14"}, found
