"""Gather and slice: rows_to_columns all-gathers the whole array and slices its columns.
Right values, but n times the bytes of an all-to-all; the visible and hidden tests fail: "expected only
all-to-all, got all-gather".
"""

EXPECTED = {'lost': ['test_rows_to_columns_visible', 'test_rows_to_columns_hidden'],
 'feedback': ['expected only all-to-all, got all-gather',
              'Gathering the whole array and slicing it moves n times more']}


def rows_to_columns(x: jax.Array, mesh: Mesh) -> jax.Array:
    """The values of x (laid out P('X', None)), laid out P(None, 'X')."""
    def swap_split(x_block):
        whole = jax.lax.all_gather(x_block, "X", axis=0, tiled=True)
        width = whole.shape[1] // jax.lax.axis_size("X")
        return jax.lax.dynamic_slice_in_dim(whole, jax.lax.axis_index("X") * width, width, axis=1)

    return jax.shard_map(swap_split, mesh=mesh, in_specs=P("X", None), out_specs=P(None, "X"))(x)
