"""grading/record.py: a graded learner as a type, and the one owner of grading/reports/<assignment>/."""

import json

from grading.record import LearnerRecord, ReportFolder, Result


def test_a_record_round_trips_and_keeps_keys_it_does_not_know(tmp_path):
    # A field added by a newer grader (say, a submission history) survives an older grader's rewrite,
    # and a record kept before `result` existed reads back without one.
    kept = {
        "learner": "ada",
        "source": "ada.ipynb",
        "scores": {"test_f_visible": 1, "test_f_hidden": 0.0},
        "notes": ["repaired: 1 extra code cell(s) were kept"],
        "seconds": 12.5,
        "phases": {"autograde": 10.0},
        "messages": {"test_f_hidden": "CheckFailed: f(x): expected 1, got 2."},
        "answers": {"f": "def f(x):\n    return 2\n"},
        "submitted": "2026-10-01T12:00:00+00:00",
        "submitted_from": "times.csv",
        "history": [{"submitted": "2026-09-30T12:00:00+00:00"}],
    }
    record = LearnerRecord.from_json(json.dumps(kept))
    assert record.scores == {"test_f_visible": 1.0, "test_f_hidden": 0.0} and record.result is None
    assert record.extra == {"history": kept["history"]}
    assert record.total([("test_f_visible", 1.0), ("test_f_hidden", 2.0)]) == 1.0
    record.result = Result(total=1.0, max_score=3.0, dated=True, days_late=2, hours_late=32.5, penalty=0.6)
    again = LearnerRecord.from_json(record.to_json())
    assert again == record and again.result.exported == 1.0 - 0.6
    assert list(json.loads(record.to_json()))[-2:] == ["result", "history"]  # known keys first, in order


def test_a_notebook_that_never_ran_keeps_no_answer_and_no_message():
    assert LearnerRecord("x", notes=["not a readable notebook; scored 0."]).never_ran
    assert not LearnerRecord("y", answers={"f": "def f(): ..."}).never_ran


def test_the_report_folder_is_the_one_place_its_paths_are_spelt(tmp_path):
    folder = ReportFolder(tmp_path, "01_meshes")
    assert folder.path == tmp_path / "grading" / "reports" / "01_meshes"
    assert folder.page("ada") == folder.path / "feedback" / "ada.html"
    assert folder.submission("ada") == folder.path / "submissions" / "ada.ipynb"
    assert folder.export_file("canvas") == folder.path / "export" / "canvas.csv"
    assert not folder.graded() and folder.records() == []
    for learner in ("bob", "ada"):
        folder.write(LearnerRecord(learner, scores={"t": 1.0}))
    assert folder.graded() and [r.learner for r in folder.records()] == ["ada", "bob"]
    assert folder.read("ada") == LearnerRecord("ada", scores={"t": 1.0}) and folder.read("eve") is None


def test_grading_a_learner_again_keeps_what_a_newer_grader_added(tmp_path):
    # write_reports builds a fresh record from the new outcome; keys it does not know (a history, say)
    # come along from the record it replaces, and every record gets its result.
    from grading import reports, worker

    root = worker.copy_course(tmp_path, assignment="01_meshes")
    folder = ReportFolder(root, "01_meshes")
    folder.write(LearnerRecord("ada", scores={}, extra={"history": ["first.ipynb"]}))
    outcome = worker.Outcome(learner="ada", source=tmp_path / "ada.ipynb")
    outcome.scores = dict(worker.graded_cells("01_meshes", root))
    reports.write_reports("01_meshes", [outcome], root)
    kept = folder.read("ada")
    assert kept and kept.extra == {"history": ["first.ipynb"]} and kept.source == "ada.ipynb"
    assert kept.result and kept.result.total == kept.result.max_score == sum(outcome.scores.values())
