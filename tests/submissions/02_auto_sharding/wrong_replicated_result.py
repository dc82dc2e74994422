"""Replicated result: reduce_scatter_matmul asks for out_shardings P('X', None), replicating over 'Y'.
It keeps a's row split and looks complete, but the result is duplicated along 'Y'; the visible and hidden
tests count elements of the result per device: "no two devices share" / "does not name replicates it".
"""

EXPECTED = {'lost': ['test_reduce_scatter_matmul_visible', 'test_reduce_scatter_matmul_hidden'],
 'feedback': ['elements of the result per device',
              'no two devices share',
              'does not name replicates it']}


def reduce_scatter_matmul(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """a @ w for A[B_X, D_Y] and W[D_Y, F], with a result that no two devices share."""
    # keeps the rows split over 'X' like a, but says nothing about 'Y': the result is replicated over it
    return jax.jit(jnp.matmul, out_shardings=NamedSharding(mesh, P("X", None)))(a, w)
