"""Graders called by hidden test cells: each compares a learner's function with a naive oracle.

One module per assignment (`a01_meshes` for assignment `01_meshes`). They run only at grading time,
on the instructor's machine; learners see their messages in the feedback, never their source.
"""
