"""jit roll: roll_global_shmap calls jnp.roll on the global array under jax.jit, leaving the communication
to the compiler. On an Auto mesh that compiles to the boundary-row permute and passes, but an Explicit mesh
refuses to roll along a sharded dimension; the self-check and the hidden test, which try both, fail with
"ShardingTypeError".
"""

EXPECTED = {'lost': ['test_roll_global_shmap_visible', 'test_roll_global_shmap_hidden'],
 'feedback': ['roll_global_shmap(x f32[16, 8], 3, mesh): expected a result, got ShardingTypeError']}


def roll_global_shmap(x: jax.Array, shift: int, mesh: Mesh) -> jax.Array:
    """jnp.roll(x, shift, axis=0) of the whole array x, laid out P('X', 'Y')."""
    return jax.jit(lambda a: jnp.roll(a, shift, axis=0))(x)
