"""grading/similarity.py: copies survive renaming and new comments; independent answers are not flagged.

Pairs from two assignments (01_meshes and 04_shard_map): the reference solution and the released stub
are the sources everyone shares, as write_reports passes them.
"""

import doctest
import re

import nbformat
import pytest

from grading import similarity
from grading.assignment import Assignment
from grading.worker import release_notebook
from tests import submissions

# Two learners' own correct answers to per_device_shape (01_meshes), written independently.
PER_DEVICE_SHAPE_A = '''def per_device_shape(global_shape, mesh_axes, spec):
    """The shape of the block each device holds."""
    out = []
    padded = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    for size, entry in zip(global_shape, padded):
        if entry is None:
            out.append(size)
            continue
        axes = entry if isinstance(entry, tuple) else (entry,)
        n = math.prod(mesh_axes[a] for a in axes)
        if size % n:
            raise ValueError(f"size {size} does not split into {n} blocks")
        out.append(size // n)
    return tuple(out)
'''
PER_DEVICE_SHAPE_B = """def per_device_shape(global_shape, mesh_axes, spec):
    shape = list(global_shape)
    for i, entry in enumerate(spec):
        if entry is None:
            continue
        names = (entry,) if isinstance(entry, str) else tuple(entry)
        count = 1
        for name in names:
            count = count * mesh_axes[name]
        if shape[i] % count != 0:
            raise ValueError("dimension %d does not divide evenly" % i)
        shape[i] = shape[i] // count
    return tuple(shape)
"""
# PER_DEVICE_SHAPE_A copied: every variable renamed, comments added, a docstring and layout changed.
PER_DEVICE_SHAPE_A_COPIED = """def per_device_shape(global_shape, mesh_axes, spec):
    # my own solution!!
    result = []
    full_spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))  # pad the spec
    for dim_size, spec_entry in zip(global_shape, full_spec):
        if spec_entry is None:
            result.append(dim_size)   # not sharded
            continue
        axis_names = spec_entry if isinstance(spec_entry, tuple) else (spec_entry,)
        parts = math.prod(mesh_axes[ax]
                          for ax in axis_names)
        if dim_size % parts:
            raise ValueError(f'size {dim_size} does not split into {parts} blocks')
        result.append(dim_size // parts)
    return tuple(result)
"""
# Two learners' own correct answers to center_rows (04_shard_map).
CENTER_ROWS_A = """def center_rows(x, mesh):
    def f(blk):
        total = jax.lax.psum(blk.sum(axis=1, keepdims=True), "Y")
        n = jax.lax.psum(blk.shape[1], "Y")
        return blk - total / n

    return jax.shard_map(f, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(x)
"""
CENTER_ROWS_B = """def center_rows(x, mesh):
    spec = P("X", "Y")

    @partial(jax.shard_map, mesh=mesh, in_specs=spec, out_specs=spec)
    def centered(b):
        mean = jax.lax.pmean(jnp.mean(b, axis=1, keepdims=True), "Y")
        return b - mean

    return centered(x)
"""


def _excluded(assignment: str) -> dict[str, list[str]]:
    """exercise -> [reference answer, released stub], as write_reports excludes them."""
    solution = Assignment(nbformat.read(submissions.solution_path(assignment), as_version=4)).answers()
    stubs = Assignment(nbformat.read(release_notebook(assignment), as_version=4)).answers()
    return {e: [solution[e], stubs[e]] for e in solution}


def _renamed_copy(source: str) -> str:
    """``source`` with its own variables renamed and its comments changed, as a copier hides a copy."""
    out = source
    for k, name in enumerate(sorted(similarity.bound_names(source) - {"center_rows", "x", "mesh"})):
        out = re.sub(rf"\b{name}\b", f"my_var_{k}", out)
    return "# copied, but who would know\n" + out.replace("#", "# a new comment:")


def test_normalisation_ignores_names_comments_docstrings_and_layout():
    # The property the fingerprint rests on: a rename and a reformat give the same tokens.
    assert similarity.normalised_tokens(PER_DEVICE_SHAPE_A) == similarity.normalised_tokens(
        PER_DEVICE_SHAPE_A_COPIED
    )
    # ... while the functions an answer calls still count: jnp.sum is not jnp.mean.
    assert similarity.normalised_tokens("def f(x):\n    return jnp.sum(x)") != similarity.normalised_tokens(
        "def f(y):\n    return jnp.mean(y)"
    )


@pytest.mark.parametrize(
    ("assignment", "exercise", "answer", "copy"),
    [
        ("01_meshes", "per_device_shape", PER_DEVICE_SHAPE_A, PER_DEVICE_SHAPE_A_COPIED),
        ("04_shard_map", "center_rows", CENTER_ROWS_A, _renamed_copy(CENTER_ROWS_A)),
        (
            "04_shard_map",
            "center_rows",
            submissions.load("04_shard_map")["wrong_center_gathers"].answers["center_rows"],
            _renamed_copy(submissions.load("04_shard_map")["wrong_center_gathers"].answers["center_rows"]),
        ),
    ],
    ids=["01-own-answer", "04-own-answer", "04-committed-wrong-answer"],
)
def test_similar_pairs_flags_a_renamed_and_recommented_copy(assignment, exercise, answer, copy):
    answers = {"original": {exercise: answer}, "copier": {exercise: copy}}
    pairs = similarity.similar_pairs(answers, _excluded(assignment))
    assert [(p.a, p.b, p.exercise) for p in pairs] == [("copier", "original", exercise)]
    assert pairs[0].score >= similarity.THRESHOLD


@pytest.mark.parametrize(
    ("assignment", "exercise", "a", "b"),
    [
        ("01_meshes", "per_device_shape", PER_DEVICE_SHAPE_A, PER_DEVICE_SHAPE_B),
        ("04_shard_map", "center_rows", CENTER_ROWS_A, CENTER_ROWS_B),
    ],
)
def test_similar_pairs_leaves_independent_correct_answers_alone(assignment, exercise, a, b):
    # Each also beside the reference solution handed in as is: what the reference holds is no one's.
    reference = submissions.solution_answers(assignment)[exercise]
    answers = {"ada": {exercise: a}, "grace": {exercise: b}, "reference_solution": {exercise: reference}}
    assert similarity.similar_pairs(answers, _excluded(assignment)) == []


def test_similar_pairs_ignores_what_most_of_the_class_shares():
    # An idiom more than common_limit(n) learners write is nobody's copy.
    class_size = 30
    sharing = similarity.common_limit(class_size) + 1
    answers = {f"learner_{k}": {"per_device_shape": PER_DEVICE_SHAPE_B} for k in range(sharing)}
    for k in range(class_size - sharing):
        answers[f"other_{k}"] = {"per_device_shape": f"def per_device_shape():\n    return {k}"}
    assert similarity.similar_pairs(answers, _excluded("01_meshes")) == []
    # ... while the same answer in fewer hands is flagged, every pair of them.
    answers["learner_0"] = {"per_device_shape": "def per_device_shape():\n    return -1"}
    assert (
        len(similarity.similar_pairs(answers, _excluded("01_meshes"))) == (sharing - 1) * (sharing - 2) // 2
    )


def test_docstring_examples_print_what_they_show():
    # grading/ is not in pytest's doctest paths: its examples are run here.
    assert doctest.testmod(similarity).failed == 0
