"""Preset at definition: mlp_value_and_grads sets default_matmul_precision only while defining loss_fn.
The setting is read when the function is traced, which happens outside the with block; the visible and
hidden tests fail on "the precision of every dot_general" ("read when the function is traced").
"""

EXPECTED = {'lost': ['test_mlp_value_and_grads_visible', 'test_mlp_value_and_grads_hidden'],
 'feedback': ['the precision of every dot_general', 'read when the function is traced']}


def mlp_value_and_grads(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array, preset):
    """(loss, (grad_w1, grad_w2)) of mean((tanh(x @ w1) @ w2 - y)²), every matmul running `preset`."""
    # the setting is active while the function is *defined*, and gone when it is traced
    with jax.default_matmul_precision(str(getattr(preset, "name", preset))):
        def loss_fn(w1, w2):
            return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

    return jax.value_and_grad(loss_fn, argnums=(0, 1))(w1, w2)
