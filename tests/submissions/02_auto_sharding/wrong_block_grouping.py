"""Block grouping: block_means_jit reshapes as (block size, mesh axis size) instead of the reverse.
Both orders type-check and give a mesh-shaped result, but each "block" then takes strided rows; the visible
and hidden tests fail: "Split each dimension as (mesh axis size, block size)".
"""

EXPECTED = {'lost': ['test_block_means_jit_visible', 'test_block_means_jit_hidden'],
 'feedback': ['entry (i, j) belongs to rows 4i:4i+4',
              'Split each dimension as (mesh axis size, block size)']}


def block_means_jit(x: jax.Array, mesh: Mesh) -> jax.Array:
    """The mean of the block each device holds of `x` (laid out P('X', 'Y')), arranged like the mesh."""
    nx, ny = mesh.shape["X"], mesh.shape["Y"]
    s, d = x.shape
    # groups rows as (block size, mesh axis): every group takes one row from each block
    return x.reshape(s // nx, nx, d // ny, ny).mean(axis=(0, 2))
