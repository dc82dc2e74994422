"""Instructor-side grading: nbgrader configuration, graders for hidden tests, the `make grade` workflow."""

import sys

# jsonschema (under nbformat and nbgrader) imports rfc3987_syntax when it is installed, to check IRIs,
# which no notebook or gradebook schema uses; it builds a grammar when imported: about 1.3 s of every
# grading process. Marked absent, jsonschema skips that check (its own fallback).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
