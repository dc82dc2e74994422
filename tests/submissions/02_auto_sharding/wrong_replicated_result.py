"""Replicated result: reduce_scatter_matmul differs from the reference solution.

Converted from wrong_replicated_result.ipynb by `python -m tests.submissions convert 02_auto_sharding`.
Dropped as copies of an older solution (their tests keep full marks): block_means_jit, entry_block_shapes, constrained_mlp.
"""

EXPECTED = {'lost': ['test_reduce_scatter_matmul_visible', 'test_reduce_scatter_matmul_hidden'],
 'feedback': ['elements of the result per device',
              'no two devices share',
              'does not name replicates it']}


def reduce_scatter_matmul(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """a @ w for A[B_X, D_Y] and W[D_Y, F], with a result that no two devices share."""
    # keeps the rows split over 'X' like a, but says nothing about 'Y': the result is replicated over it
    return jax.jit(jnp.matmul, out_shardings=NamedSharding(mesh, P("X", None)))(a, w)
