"""nbgrader's commands in processes forked from a server (grading/nbgrader_process.py)."""

import subprocess
import sys
from pathlib import Path

from grading import nbgrader_process, worker


def test_the_gradebook_schema_head_is_what_alembic_says():
    # nbgrader asks `alembic heads` each time it creates a gradebook; the server reads the same answer
    # from nbgrader's migration scripts once.
    import nbgrader.api

    alembic = Path(sys.executable).parent / "alembic"
    ini = Path(nbgrader.api.__file__).parent / "alembic.ini"
    with nbgrader.api._temp_alembic_ini("sqlite:////tmp/gradebook.db") as config:
        printed = subprocess.run(
            [str(alembic), "-c", config, "heads"], capture_output=True, text=True, check=True
        )
    assert ini.exists()
    assert printed.stdout.split()[0] == nbgrader_process.alembic_head()


def test_a_command_gives_nbgraders_exit_code_and_log_and_a_gradebook(tmp_path):
    course = worker.copy_course(tmp_path, assignment="01_meshes")
    env = worker._env(course)
    code, log = nbgrader_process.run(["autograde", "no_such_assignment", "--force"], course, env, timeout=120)
    assert code not in (0, None)
    assert "no_such_assignment" in log
    worker.prepare_gradebook("01_meshes", course)  # generate_assignment, through the server
    assert worker.graded_cells("01_meshes", course)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        assert gb.find_assignment("01_meshes").notebooks[0].name == "01_meshes"


def test_config_options_on_the_command_line_reach_the_preprocessors_in_the_forked_child(tmp_path):
    # What the worker tells nbgrader (grading/protocol.py) travels as --Class.trait=value options of the
    # course's preprocessors: here a skipped cell, the death file and the cell time limit, each seen to
    # act inside an nbgrader command forked from the server.
    import nbformat

    from grading import preprocessors, protocol
    from grading.assignment import grade_id, is_answer

    course = worker.copy_course(tmp_path, assignment="01_meshes")
    worker.prepare_gradebook("01_meshes", course)
    release = worker.release_notebook("01_meshes", course)
    nb = nbformat.read(release, as_version=4)
    answers = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and is_answer(cell)]
    dies, sleeps = answers[0], answers[1]
    nb.cells[dies].source = "import os\nos._exit(1)"
    nb.cells[sleeps].source = "import time\ntime.sleep(3600)"
    submitted = course / "grading" / "submitted" / "learner" / "01_meshes"
    submitted.mkdir(parents=True)
    nbformat.write(nb, submitted / release.name)
    env, death_file = worker._env(course), tmp_path / protocol.DEATH_FILE_NAME
    autograde = ["autograde", "01_meshes", "--student", "learner", "--force"]

    code, log = nbgrader_process.run(
        [*autograde, *protocol.autograde_options([], death_file, 600)], course, env, timeout=600
    )
    assert code != 0, log
    assert protocol.Death.read(death_file) == protocol.Death(dies, grade_id(nb.cells[dies]))

    death_file.unlink()
    code, log = nbgrader_process.run(
        [*autograde, *protocol.autograde_options([dies], death_file, 20)], course, env, timeout=600
    )
    assert code == 0, log
    assert not death_file.exists()
    graded = nbformat.read(course / "grading" / "autograded" / "learner" / "01_meshes" / release.name, 4)
    assert graded.cells[dies].source == preprocessors.SKIPPED_CELL_SOURCE
    errors = [o.get("ename") for o in graded.cells[sleeps].outputs if o.get("output_type") == "error"]
    assert "CellTimeoutError" in errors  # interrupted at the option's 20 s: the sleep would outlast the test
