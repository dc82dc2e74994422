"""One direction: matmul_allgather_bidir just calls the one-directional matmul_allgather.
Right values, so only the schedule is wrong; the visible and hidden tests fail: blocks must go "both ways
round", with "shifts +1 and -1".
"""

EXPECTED = {'lost': ['test_matmul_allgather_bidir_visible', 'test_matmul_allgather_bidir_hidden'],
 'feedback': ['both ways round', 'shifts +1 and -1']}


def matmul_allgather_bidir(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """As matmul_allgather, with A's blocks travelling both ways round 'Y'."""
    # the one-directional ring again: every block goes the long way round to the left
    return matmul_allgather(a, w, mesh)
