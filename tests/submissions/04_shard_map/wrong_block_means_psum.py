"""Block means psum: block_means_shmap psums a row of means along 'Y' and returns it P('X', None).
Values are right, but each mean needs only its own block; the visible and hidden tests fail: "expected no
collectives (each device works on its own block)".
"""

EXPECTED = {'lost': ['test_block_means_shmap_visible', 'test_block_means_shmap_hidden'],
 'feedback': ['expected no collectives (each device works on its own block)',
              'each mean needs only the device']}


def block_means_shmap(x: jax.Array, mesh: Mesh) -> jax.Array:
    """The mean of every device's block of x (laid out P('X', 'Y')), arranged like the mesh."""
    n_y = mesh.shape["Y"]

    def row_of_means(x_block):
        # put this block's mean in its column, then share the row of means along 'Y'
        j = jax.lax.axis_index("Y")
        means = jnp.zeros((1, n_y)).at[0, j].set(jnp.mean(x_block))
        return jax.lax.psum(means, "Y")

    return jax.shard_map(row_of_means, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", None))(x)
