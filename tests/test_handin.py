"""What was handed in (grading/handin.py): learner ids from hostile file names, the folder's other
entries, clashes, another assignment's notebook, history; and `python -m grading.grade` refusing a
batch as a process (exit code, one line, nothing left behind).

The whole hostile batch through `make grade` is in tests/test_grading_hostile.py.
"""

import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from grading import handin, worker
from grading.record import ReportFolder
from tools import handed_in

ROOT = Path(__file__).resolve().parents[1]

#: File names a learner, an LMS or a file system can produce, the hostile ones first.
HOSTILE = [
    "--help.ipynb",
    "-rf.ipynb",
    "-.ipynb",
    "..ipynb",
    "...ipynb",
    ".ipynb",
    "",
    "..",
    "/etc/passwd",
    "../../etc/passwd.ipynb",
    "a/b.ipynb",
    "*.ipynb",
    "[ab]?.ipynb",
    "x" * 300 + ".ipynb",
    "x" * 299 + "y.ipynb",
    "李" * 200 + ".ipynb",
    "tab\there.ipynb",
    "bell\x07\x1b[31mred.ipynb",
    "new\nline.ipynb",
    "\u202eevil\u200f.ipynb",  # right-to-left override and mark
    "\u200bzero\u2060width.ipynb",
    "李雷.ipynb",
    "王芳.ipynb",
    "José Núñez.ipynb",
    "Jose\u0301 Nu\u0301n\u0303ez.ipynb",  # the same name, decomposed (macOS's file names)
    "Ada.ipynb",
    "ada.ipynb",
    "ADA.IPYNB",
    "नमस्ते.ipynb",
    "مريم.ipynb",
    "🎉🎉.ipynb",
    "😀.ipynb",
    "a\udcff.ipynb",  # a byte that is not UTF-8, as os.fsdecode gives it
    "name..ipynb",
    "ada_lovelace.ipynb",
    "Ada Lovelace (1).ipynb",
    "name_12345_67890_ada.ipynb",  # a Canvas download
]


def _safe(learner: str) -> None:
    assert learner and learner not in {".", ".."}, learner
    assert not learner.startswith(("-", ".")) and not learner.endswith("."), learner
    assert len(learner.encode("utf-8")) <= handin.MAX_ID_BYTES, learner  # encodable: no lone surrogate
    assert unicodedata.normalize("NFC", learner) == learner
    for char in learner:
        assert char in "_-." or unicodedata.category(char)[0] in "LMN", (learner, char)


def test_learner_ids_are_safe_path_components_and_command_line_values():
    # Property: whatever the file name, its id is a non-empty NFC string of letters, marks, digits,
    # '_', '-', '.' that starts with neither '-' (an option) nor '.' (hidden, '..'), fits a file name,
    # and is the same for the same name.
    for name in HOSTILE:
        learner = handin.learner_id(name)
        _safe(learner)
        assert handin.learner_id(name) == learner


def test_learner_ids_keep_names_readable_and_apart():
    # Property: ordinary names keep the ids they always had; names in other scripts stay readable and
    # distinct; only names equal in Unicode's composed form share an id.
    assert handin.learner_id("ada_lovelace.ipynb") == "ada_lovelace"
    assert handin.learner_id("Ada Lovelace (1).ipynb") == "Ada_Lovelace__1_"
    assert handin.learner_id("José Núñez.ipynb") == "José_Núñez"
    assert handin.learner_id("Jose\u0301 Nu\u0301n\u0303ez.ipynb") == "José_Núñez"
    assert handin.learner_id("李雷.ipynb") == "李雷" and handin.learner_id("王芳.ipynb") == "王芳"
    assert handin.learner_id("नमस्ते.ipynb") == "नमस्ते"
    assert handin.learner_id("--help.ipynb") == "__help" and handin.learner_id("-rf.ipynb") == "_rf"
    assert handin.learner_id("UPPER_CASE.IPYNB") == "UPPER_CASE"
    assert handin.learner_id("\u202eevil\u200f.ipynb") == "_evil_"
    assert handin.learner_id("🎉🎉.ipynb").startswith("learner_")
    assert handin.learner_id("🎉🎉.ipynb") != handin.learner_id("😀.ipynb")
    assert handin.learner_id("x" * 300 + ".ipynb") != handin.learner_id("x" * 299 + "y.ipynb")
    assert handin.learner_id("x" * 300 + ".ipynb").startswith("x" * 80)
    # Across the hostile names, only names that are the same without '.ipynb' in composed form share
    # an id; any other pair that would is reported as a clash before grading (next test).
    by_id: dict[str, list[str]] = {}
    for name in HOSTILE:
        by_id.setdefault(handin.learner_id(name), []).append(name)
    shared = sorted(sorted(names) for names in by_id.values() if len(names) > 1)
    assert shared == [["", ".ipynb"], ["..", "...ipynb"], sorted(["José Núñez.ipynb", HOSTILE[24]])]


def test_a_learner_id_is_its_own_id():
    # Property: a stored submission (submissions/<learner>.ipynb) is graded again as the same learner.
    for name in HOSTILE:
        learner = handin.learner_id(name)
        assert handin.learner_id(learner + ".ipynb") == learner, name


def test_clashes_name_the_files(tmp_path):
    # Property: files that would be one learner (the same id, or ids differing only by case, which a
    # case-insensitive file system would merge) are reported with their file names; others are not.
    names = ["a b.ipynb", "a_b.ipynb", "Ada.ipynb", "ada.IPYNB", "José Núñez.ipynb", "ok.ipynb"]
    names.append("Jose\u0301 Nu\u0301n\u0303ez.ipynb")
    files = [tmp_path / n for n in names]
    said = handin.clashes(files)
    assert len(said) == 3, said
    assert "'a b.ipynb', 'a_b.ipynb' give the learner id 'a_b'" in said
    assert any("'Ada.ipynb', 'ada.IPYNB'" in s and "differing only by case" in s for s in said), said
    assert any("'José Núñez.ipynb'" in s and "José_Núñez" in s for s in said), said
    assert not any("ok.ipynb" in s for s in said)
    assert handin.clashes([tmp_path / "李雷.ipynb", tmp_path / "王芳.ipynb"]) == []


def test_folder_contents_grades_notebooks_in_any_case_and_names_the_rest(tmp_path):
    for name in ["a.ipynb", "UPPER_CASE.IPYNB", "x.ipynb.txt", "all.zip", "notes.txt"]:
        (tmp_path / name).write_text("{}")
    (tmp_path / "folder.ipynb").mkdir()
    notebooks, skipped = handin.folder_contents(tmp_path)
    assert [p.name for p in notebooks] == ["UPPER_CASE.IPYNB", "a.ipynb"]
    assert skipped == ["all.zip", "folder.ipynb/", "notes.txt", "x.ipynb.txt"]
    line = handin.skipped_line(skipped)
    assert "4 entries" in line and "'x.ipynb.txt'" in line and "unpack the .zip" in line


def test_another_assignments_notebook_is_named_and_this_ones_are_not():
    # Property: a download of any other assignment's notebook is recognised as that assignment's; the
    # assignment's own notebooks (solved, released, and every damaged one committed) are not flagged.
    assignments = handin.Assignments(ROOT)
    for other in ["02_auto_sharding", "06_moe", "12_many_hosts"]:
        download = json.dumps(handed_in.colab_download(handed_in.solved_notebook(other))).encode()
        note = assignments.other(download, "01_meshes")
        assert note and f"assignment {other}'s notebook" in note and "could not be matched" in note
    own = json.dumps(handed_in.colab_download(handed_in.solved_notebook("01_meshes"))).encode()
    assert assignments.other(own, "01_meshes") is None
    for path in sorted((ROOT / "tests" / "submissions" / "01_meshes").glob("*.ipynb")):
        assert assignments.other(path.read_bytes(), "01_meshes") is None, path.name
    assert assignments.other(b"", "01_meshes") is None  # unreadable: the worker says so


def test_keep_history_keeps_each_earlier_file_and_its_results(tmp_path):
    folder_ = ReportFolder(tmp_path, "01_meshes")
    reports = folder_.path
    for folder in ("submissions", "learners", "feedback"):
        (reports / folder).mkdir(parents=True)

    def handed(data: bytes) -> Path:
        path = tmp_path / "new.ipynb"
        path.write_bytes(data)
        return path

    assert handin.keep_history(folder_, "ada", handed(b"first")) is None  # nothing graded before
    (reports / "submissions" / "ada.ipynb").write_bytes(b"first")
    (reports / "learners" / "ada.json").write_text('{"scores": 1}')
    (reports / "feedback" / "ada.html").write_text("<p>page</p>")
    assert handin.keep_history(folder_, "ada", handed(b"first")) is None  # the same file again
    kept = handin.keep_history(folder_, "ada", handed(b""))
    assert kept == reports / "history" / "ada" / "1.ipynb" and kept.read_bytes() == b"first"
    assert (kept.parent / "1.json").read_text() == '{"scores": 1}'
    assert (kept.parent / "1.html").read_text() == "<p>page</p>"
    (reports / "submissions" / "ada.ipynb").write_bytes(b"")
    assert handin.keep_history(folder_, "ada", handed(b"third")) == kept.parent / "2.ipynb"
    assert (kept.parent / "2.ipynb").read_bytes() == b""


def test_grade_one_turns_any_error_into_the_learners_note(tmp_path, monkeypatch):
    # Property: whatever raises while one notebook is graded (here: no template, then nbgrader's
    # gradebook missing the learner, as `--help.ipynb` once made it), grade_one returns that learner's
    # outcome, scored 0 with a note; and the local engine yields an outcome even if grade_one raised.
    from nbgrader.api import MissingEntry

    from grading import engines

    options = dict(notebook_timeout=10, cell_timeout=10)
    outcome = worker.grade_one("01_meshes", "--help.ipynb", b"{}", tmp_path / "absent", **options)
    assert outcome.learner == "__help" and outcome.scores == {} and not outcome.graded
    assert outcome.notes[-1].startswith("grading stopped on an error in the grading code (FileNotFoundError")

    def missing(*args, **kwargs):
        raise MissingEntry()

    template = tmp_path / "template"
    template.mkdir()
    monkeypatch.setattr(worker, "_grade_in", missing)
    outcome = worker.grade_one("01_meshes", "-rf.ipynb", b"{}", template, **options)
    assert outcome.learner == "_rf" and outcome.scores == {} and outcome.files == {}
    assert "(MissingEntry)" in outcome.notes[-1] and "grade this learner again" in outcome.notes[-1]

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(engines, "grade_one", broken)
    tasks = [("a.ipynb", b""), ("b.ipynb", b"")]
    outcomes = list(engines.run_local("01_meshes", tasks, template, options, jobs=2))
    assert sorted(o.learner for o in outcomes) == ["a", "b"]
    assert all("RuntimeError: a bug" in o.notes[0] for o in outcomes)


def test_results_bring_back_only_what_grading_reads_each_capped(tmp_path):
    # Property: of nbgrader's folders, only the notebook, its timestamp and the feedback page come
    # back; a file over the cap is not read, and notes name it and every file the learner's code wrote.
    course = worker.copy_course(tmp_path, assignment="01_meshes")
    name = worker.release_notebook("01_meshes", course).name
    base = course / "grading"
    for folder, files in {
        "submitted": {name: 10, "timestamp.txt": 20},
        "autograded": {name: 3000, "timestamp.txt": 20, "big.bin": 5000, "out/deep.txt": 3},
        "feedback": {name.replace(".ipynb", ".html"): 100, "timestamp.txt": 20, "big.bin": 5000},
    }.items():
        for file, size in files.items():
            path = base / folder / "ada" / "01_meshes" / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * size)
    files, notes = worker.results(course, "01_meshes", "ada", max_bytes=2048)
    assert {k: sorted(v) for k, v in files.items()} == {
        "submitted": [name, "timestamp.txt"],
        "autograded": ["timestamp.txt"],
        "feedback": ["01_meshes.html", "timestamp.txt"],
    }
    assert notes == [
        "the graded notebook (2.9 KiB) is larger than the 2.0 KiB a graded file may be: not kept.",
        "files the notebook's code wrote beside it were not kept: big.bin (4.9 KiB), out/deep.txt (3 bytes).",
    ]


def test_a_written_file_is_named_with_its_escapes_spelt_out(tmp_path):
    # Property: a name the learner's code chose reaches the note (and so report.txt, the comment and
    # the terminal) with no character that acts: an escape sequence, a carriage return, a newline.
    course = worker.copy_course(tmp_path, assignment="01_meshes")
    folder = course / "grading" / "autograded" / "ada" / "01_meshes"
    folder.mkdir(parents=True)
    (folder / "x\x1b[1A\x1b[2K\rbob: 14 of 14\n\u202etxt").write_bytes(b"1")
    _, notes = worker.results(course, "01_meshes", "ada", max_bytes=2048)
    assert notes == [
        "files the notebook's code wrote beside it were not kept: "
        "x\\x1b[1A\\x1b[2K\\rbob: 14 of 14\\n\\u202etxt (1 bytes)."
    ]


# ---------------------------------------------------------------------------------------------------
# `python -m grading.grade` refusing a batch, as a process


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return worker.copy_course(tmp_path_factory.mktemp("refusals"), assignment="01_meshes")


def _refusals(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """case -> (arguments, text the one line on stderr must hold)."""
    good = tmp / "good"
    good.mkdir()
    (good / "ada.ipynb").write_text("{}")
    clash = tmp / "clash"
    clash.mkdir()
    for name in ("a b.ipynb", "a_b.ipynb", "ok.ipynb"):
        (clash / name).write_text("{}")
    zipped = tmp / "zipped"
    zipped.mkdir()
    (zipped / "all.zip").write_bytes(b"PK")
    (tmp / "file.ipynb").write_text("{}")
    return {
        "unknown assignment": (["99_nothing", str(good)], "no assignment '99_nothing'"),
        "missing folder": (["01_meshes", str(tmp / "absent")], "no folder"),
        "a file, not a folder": (["01_meshes", str(tmp / "file.ipynb")], "is a file, not a folder"),
        "no notebooks": (["01_meshes", str(zipped)], "no .ipynb files"),
        "a name clash": (["01_meshes", str(clash)], "'a b.ipynb', 'a_b.ipynb' give the learner id 'a_b'"),
        "missing course file": (["01_meshes", str(good), "--course", str(tmp / "c.toml")], "no course file"),
        "missing times file": (["01_meshes", str(good), "--times", str(tmp / "t.csv")], "no times file"),
        "regrade with nothing stored": (["01_meshes", "--regrade"], "nothing to regrade"),
    }


def test_grade_command_refuses_with_one_line_an_exit_code_and_nothing_left(course, tmp_path):
    # Property: each error that stops `python -m grading.grade` before grading exits 2, prints one line
    # on stderr that says what is wrong (no traceback, no BrokenPipeError), and leaves no temporary
    # folder behind (nbgrader's server is not started for a batch that cannot run).
    for case, (args, said) in _refusals(tmp_path).items():
        scratch = tmp_path / f"tmp-{case.replace(' ', '_')}"
        scratch.mkdir()
        env = dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=str(ROOT))
        done = subprocess.run(
            [sys.executable, "-m", "grading.grade", *args, "--root", str(course)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (case, done.returncode, done.stderr)
        assert len(lines) == 1 and said in lines[0], (case, done.stderr)
        assert not list(scratch.iterdir()), (case, list(scratch.iterdir()))
        assert not (course / "grading" / "reports").exists(), case  # nothing written


def test_make_grade_fails_when_the_command_does(tmp_path):
    # Property: `make grade` passes the command's failure on (make exits non-zero), with its line.
    if subprocess.run(["make", "-q", "venv"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("make would install the virtual environment first")
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "ada.ipynb").write_text("{}")
    env = dict(os.environ, TMPDIR=str(tmp_path))
    done = subprocess.run(
        ["make", "-s", "grade", "ASSIGNMENT=99_nothing", f"SUBMISSIONS={folder}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0 and "no assignment '99_nothing'" in done.stderr, done.stderr
    assert shutil.which("make")
