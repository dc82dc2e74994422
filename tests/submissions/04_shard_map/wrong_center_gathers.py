"""Center gathers: center_rows differs from the reference solution.

Converted from wrong_center_gathers.ipynb by `python -m tests.submissions convert 04_shard_map`.
"""

EXPECTED = {'lost': ['test_center_rows_visible', 'test_center_rows_hidden'],
 'feedback': ['reduce before you communicate', 'sent per device, got']}


def center_rows(x: jax.Array, mesh: Mesh) -> jax.Array:
    """x minus the mean of each of its rows, laid out like x (P('X', 'Y'))."""
    def center_block(x_block):
        whole_rows = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)
        return x_block - jnp.mean(whole_rows, axis=1, keepdims=True)

    return jax.shard_map(center_block, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(x)
