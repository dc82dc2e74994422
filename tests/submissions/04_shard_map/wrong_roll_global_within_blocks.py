"""Within blocks: roll_global_shmap rolls each device's block in shard_map, as in Exercise 4.2, so the rows
that leave a block wrap round inside it instead of reaching the next device. Layout and collectives are
fine (there are none), but the first |shift| rows of every block are wrong; the self-check and the hidden
test say so: "that is the roll within each block".
"""

EXPECTED = {'lost': ['test_roll_global_shmap_visible', 'test_roll_global_shmap_hidden'],
 'feedback': ['that is the roll within each block']}


def roll_global_shmap(x: jax.Array, shift: int, mesh: Mesh) -> jax.Array:
    """jnp.roll(x, shift, axis=0) of the whole array x, laid out P('X', 'Y')."""
    def roll_block(x_block):
        return jnp.roll(x_block, shift, axis=0)

    return jax.shard_map(roll_block, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(x)
