"""Lets `nbgrader` run from the repository root: the real configuration lives in grading/."""

import os

load_subconfig(os.path.join("grading", "nbgrader_config.py"))  # noqa: F821 (provided by traitlets)
