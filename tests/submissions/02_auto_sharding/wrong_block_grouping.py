"""Block grouping: block_means_jit differs from the reference solution.

Converted from wrong_block_grouping.ipynb by `python -m tests.submissions convert 02_auto_sharding`.
Dropped as copies of an older solution (their tests keep full marks): reduce_scatter_matmul, entry_block_shapes, constrained_mlp.
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
