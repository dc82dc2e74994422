"""nbgrader configuration of the course, loaded by the root nbgrader_config.py.

The course root is ``$SHARDBOOK_COURSE_ROOT`` (``grading.protocol.COURSE_ROOT_ENV``, set by the grading
worker) or else the working directory, the repository root when nbgrader runs from there. What the
worker tells one nbgrader command comes as command-line options
(``grading.protocol.autograde_options``). Paths below are relative to the course root:

solutions/<assignment>/   instructor notebooks (nbgrader "source"); the .ipynb is generated from <a>.md
exercises/<assignment>/   student notebooks generated from them (nbgrader "release"), committed for Colab
grading/submitted/<learner>/<assignment>/    where `make grade` copies learners' notebooks
grading/autograded/, grading/feedback/       nbgrader's outputs
grading/reports/<assignment>/                our outputs: scores.csv, report.txt, feedback/<learner>.html
grading/gradebook.db                         nbgrader's database
"""

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # traitlets runs this file with get_config() in its namespace
    from traitlets.config import Config

    def get_config() -> Config: ...


c = get_config()

# The course this file belongs to: so that `grading` is importable below, whatever started nbgrader.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # noqa: F821 (traitlets)
from grading import protocol  # noqa: E402

_root = os.environ.get(protocol.COURSE_ROOT_ENV, os.getcwd())
sys.path.insert(0, _root)

c.CourseDirectory.root = _root
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = os.path.join("grading", "submitted")
c.CourseDirectory.autograded_directory = os.path.join("grading", "autograded")
c.CourseDirectory.feedback_directory = os.path.join("grading", "feedback")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(_root, "grading", "gradebook.db")
c.CourseDirectory.course_id = "sharding-in-jax"
# Learners never upload data files; only the notebook is graded. "*.md": an assignment's source,
# solutions/<a>/<a>.md, holds its solutions and must never be released into exercises/.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".*", "*.md"]

# Solution and hidden-test markers: nbgrader's defaults, spelled once in grading/assignment.py, which
# every check that looks for them reads.
from grading.assignment import (  # noqa: E402
    BEGIN_HIDDEN_TESTS,
    BEGIN_SOLUTION,
    END_HIDDEN_TESTS,
    END_SOLUTION,
)

c.ClearSolutions.begin_solution_delimeter = BEGIN_SOLUTION
c.ClearSolutions.end_solution_delimeter = END_SOLUTION
c.ClearHiddenTests.begin_test_delimeter = BEGIN_HIDDEN_TESTS
c.ClearHiddenTests.end_test_delimeter = END_HIDDEN_TESTS
c.ClearSolutions.code_stub = {
    "python": '# YOUR CODE HERE\nraise NotImplementedError("Exercise not attempted yet: replace this line.")'
}
c.ClearSolutions.enforce_metadata = True

# Student notebooks keep their outputs empty and carry no execution counts.
c.ClearOutput.remove_metadata_fields = ["collapsed", "scrolled", "execution"]

# Autograding: a slow or looping cell is interrupted after this many seconds and scored as failed
# (the worker gives --cell-timeout as --Execute.timeout, which overrides this).
c.Execute.timeout = protocol.DEFAULT_CELL_TIMEOUT
c.Execute.interrupt_on_timeout = True
c.Execute.allow_errors = True
# No history database in graded kernels (nbclient already keeps it in memory): nothing of a test cell is
# written where a later cell could read it (test cells are not stored in the input history either,
# grading.preprocessors.ExecuteRecordingDeaths).
c.Execute.extra_arguments = ["--HistoryManager.enabled=False"]
# Long outputs are cut as they arrive, lines included (grading.preprocessors.OutputBudget, which says
# what it cut); nbgrader's LimitOutput still shortens long tracebacks.
c.LimitOutput.max_lines = -1

from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from grading.preprocessors import (  # noqa: E402
    ExecuteRecordingDeaths,
    HardenTests,
    HideHiddenTests,
    SkipCells,
    WarningsDoNotFail,
)

# nbgrader's autograde steps, with additions: skip cells that killed the kernel (see grading/worker.py),
# harden test cells against a notebook that redefined or patched the checking tools, and score a test
# cell by whether it raised, not by whether something wrote a warning to stderr.
c.Autograde.autograde_preprocessors = [
    SkipCells,
    HardenTests,
    ExecuteRecordingDeaths,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    WarningsDoNotFail,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]

# Feedback pages: nbgrader's, with each test's score row headed by its name (grading/templates/).
import nbgrader  # noqa: E402

c.HTMLExporter.template_name = "named_feedback"
c.HTMLExporter.extra_template_basedirs = [  # ours first; nbgrader sets its own only when this is unset
    os.path.join(_root, "grading", "templates"),
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
]
# What the learner's notebook brings to the page is only harmless formatting (grading/pagesafe.py).
c.HTMLExporter.filters = {"safe_html": "grading.pagesafe.safe_html"}

# Feedback never shows hidden-test source, nor tracebacks that would quote it; an error is shown as the
# learner saw it on Colab (its sentence and hint).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    HideHiddenTests,
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# The learner's kernel runs in a sandbox when the worker asks for it (see grading/sandbox.py).
if os.environ.get(protocol.SANDBOX_ENV):
    c.Execute.kernel_manager_class = "grading.sandbox.SandboxedKernelManager"
