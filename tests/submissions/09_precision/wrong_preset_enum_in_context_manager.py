"""Enum in the context manager: mlp_value_and_grads wraps the call of jax.value_and_grad in
jax.default_matmul_precision(preset). Right for a preset's name; jax.default_matmul_precision refuses a
jax.lax.DotAlgorithmPreset (ValueError), which the contract also allows: "with preset
DotAlgorithmPreset.F32_F32_F32", "jax.default_matmul_precision only a name".
"""

EXPECTED = {'lost': ['test_mlp_value_and_grads_visible', 'test_mlp_value_and_grads_hidden'],
 'feedback': ['with preset DotAlgorithmPreset.F32_F32_F32', 'jax.default_matmul_precision only a name']}


def mlp_value_and_grads(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array, preset):
    """(loss, (grad_w1, grad_w2)) of mean((tanh(x @ w1) @ w2 - y)²), every matmul running `preset`."""

    def loss_fn(w1, w2):
        return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

    with jax.default_matmul_precision(preset):  # takes names only
        return jax.value_and_grad(loss_fn, argnums=(0, 1))(w1, w2)
