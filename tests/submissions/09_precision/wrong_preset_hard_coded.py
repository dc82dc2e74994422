"""Preset written down: mlp_value_and_grads ignores `preset` and gives every matmul "BF16_BF16_F32_X3",
the preset the self-check once read. On a CPU that preset computes the f32 values, so the values
match; the program names the wrong preset for every other one: "for preset
DotAlgorithmPreset.F32_F32_F32", "every one with precision=BF16_BF16_F32".
"""

EXPECTED = {'lost': ['test_mlp_value_and_grads_visible', 'test_mlp_value_and_grads_hidden'],
 'feedback': ['for preset DotAlgorithmPreset.F32_F32_F32', 'every one with precision=BF16_BF16_F32']}


def mlp_value_and_grads(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array, preset):
    """(loss, (grad_w1, grad_w2)) of mean((tanh(x @ w1) @ w2 - y)²), every matmul running `preset`."""

    def loss_fn(w1, w2):
        h = jnp.tanh(jnp.dot(x, w1, precision="BF16_BF16_F32_X3"))
        return jnp.mean((jnp.dot(h, w2, precision="BF16_BF16_F32_X3") - y) ** 2)

    return jax.value_and_grad(loss_fn, argnums=(0, 1))(w1, w2)
