"""Fixed spec: running_total differs from the reference solution.

Converted from wrong_fixed_spec.ipynb by `python -m tests.submissions convert 03_explicit_sharding`.
"""

EXPECTED = {'lost': ['test_running_total_hidden'], 'feedback': ['rather than writing a fixed P(...)']}


def running_total(x: jax.Array) -> jax.Array:
    """The cumulative sum along axis 1 of x, laid out like x."""
    return auto_axes(lambda a: jnp.cumsum(a, axis=1), out_sharding=P("X", "Y"))(x)
