"""Global roll: roll_within_shards rolls the global array under jit instead of each block in shard_map.
A global roll moves rows across block boundaries (and raises ShardingTypeError under explicit axes); the
visible and hidden tests fail: "rolling the global array moves rows across block boundaries".
"""

EXPECTED = {'lost': ['test_roll_within_shards_visible', 'test_roll_within_shards_hidden'],
 'feedback': ['ShardingTypeError', 'rolling the global array moves rows across block boundaries']}


def roll_within_shards(x: jax.Array, shift: int, mesh: Mesh) -> jax.Array:
    """roll(block, shift, axis=0) - block for every device's block of x, laid out like x."""
    return jax.jit(lambda a: jnp.roll(a, shift, axis=0) - a)(x)
