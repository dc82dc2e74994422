"""Center gathers: center_rows all-gathers whole rows over 'Y' and then takes their mean.
Right values, but it moves the data instead of the partial sums; the visible and hidden tests fail on bytes
"sent per device, got ...": "reduce before you communicate".
"""

EXPECTED = {'lost': ['test_center_rows_visible', 'test_center_rows_hidden'],
 'feedback': ['reduce before you communicate', 'sent per device, got']}


def center_rows(x: jax.Array, mesh: Mesh) -> jax.Array:
    """x minus the mean of each of its rows, laid out like x (P('X', 'Y'))."""
    def center_block(x_block):
        whole_rows = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)
        return x_block - jnp.mean(whole_rows, axis=1, keepdims=True)

    return jax.shard_map(center_block, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(x)
