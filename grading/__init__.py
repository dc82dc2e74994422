"""Instructor-side grading: nbgrader configuration, graders for hidden tests, the `make grade` workflow."""
