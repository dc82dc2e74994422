"""Bidir one direction: matmul_allgather_bidir differs from the reference solution.

Converted from wrong_bidir_one_direction.ipynb by `python -m tests.submissions convert 05_collective_matmul`.
"""

EXPECTED = {'lost': ['test_matmul_allgather_bidir_visible', 'test_matmul_allgather_bidir_hidden'],
 'feedback': ['both ways round', 'shifts +1 and -1']}


def matmul_allgather_bidir(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """As matmul_allgather, with A's blocks travelling both ways round 'Y'."""
    # the one-directional ring again: every block goes the long way round to the left
    return matmul_allgather(a, w, mesh)
