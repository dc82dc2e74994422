"""Local gathers w: moe_local indexes w[b], building one [D, F] matrix per token ([S, D, F]).
Right values, but the intermediate is huge; the visible and hidden tests fail on memory ("... or more
elements on a device") and suggest to "multiply each token by its" expert's matrix.
"""

EXPECTED = {'lost': ['test_moe_local_visible', 'test_moe_local_hidden'],
 'feedback': ['or more elements on a device', 'multiply each token by its']}


def moe_local(w: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """Out[i] = A[i] @ W[B[i]] on one device, without an [S, D, F] intermediate."""
    # one [D, F] matrix per token: right values, an [S, D, F] intermediate
    return jnp.einsum("sd,sdf->sf", a, w[b])
