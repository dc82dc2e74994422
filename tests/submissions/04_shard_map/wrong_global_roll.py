"""Global roll: roll_within_shards differs from the reference solution.

Converted from wrong_global_roll.ipynb by `python -m tests.submissions convert 04_shard_map`.
"""

EXPECTED = {'lost': ['test_roll_within_shards_visible', 'test_roll_within_shards_hidden'],
 'feedback': ['ShardingTypeError', 'rolling the global array moves rows across block boundaries']}


def roll_within_shards(x: jax.Array, shift: int, mesh: Mesh) -> jax.Array:
    """roll(block, shift, axis=0) - block for every device's block of x, laid out like x."""
    return jax.jit(lambda a: jnp.roll(a, shift, axis=0) - a)(x)
