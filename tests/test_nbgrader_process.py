"""nbgrader's commands in processes forked from a server (grading/nbgrader_process.py)."""

import subprocess
import sys
from pathlib import Path

from grading import grade, nbgrader_process


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
    course = grade.copy_course(tmp_path, assignment="01_meshes")
    env = grade._env(course)
    code, log = nbgrader_process.run(["autograde", "no_such_assignment", "--force"], course, env, timeout=120)
    assert code not in (0, None)
    assert "no_such_assignment" in log
    grade.prepare_gradebook("01_meshes", course)  # generate_assignment, through the server
    assert grade.graded_cells("01_meshes", course)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        assert gb.find_assignment("01_meshes").notebooks[0].name == "01_meshes"
