"""Local gathers w: moe_local differs from the reference solution.

Converted from wrong_local_gathers_w.ipynb by `python -m tests.submissions convert 06_moe`.
Dropped as copies of an older solution (their tests keep full marks): moe_allgather.
"""

EXPECTED = {'lost': ['test_moe_local_visible', 'test_moe_local_hidden'],
 'feedback': ['or more elements on a device', 'multiply each token by its']}


def moe_local(w: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """Out[i] = A[i] @ W[B[i]] on one device, without an [S, D, F] intermediate."""
    # one [D, F] matrix per token: right values, an [S, D, F] intermediate
    return jnp.einsum("sd,sdf->sf", a, w[b])
