"""Fixed spec: running_total hard-codes out_sharding=P('X', 'Y') instead of reusing x's layout.
It is right for the visible example laid out P('X', 'Y'); only the hidden test, with another layout,
fails: "rather than writing a fixed P(...)".
"""

EXPECTED = {'lost': ['test_running_total_hidden'], 'feedback': ['rather than writing a fixed P(...)']}


def running_total(x: jax.Array) -> jax.Array:
    """The cumulative sum along axis 1 of x, laid out like x."""
    return auto_axes(lambda a: jnp.cumsum(a, axis=1), out_sharding=P("X", "Y"))(x)
