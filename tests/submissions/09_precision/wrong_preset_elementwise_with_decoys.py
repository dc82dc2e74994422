"""Elementwise model with decoys: mlp_value_and_grads computes the model with broadcast multiply-and-sum
(no matmul, so no preset) and adds a copy of the model's loss made of matmuls that carry `preset`,
multiplied by zero: five dot_generals, all naming the preset, none doing any work. The visible and
hidden tests run the program with each matmul's result doubled: "mlp_value_and_grads: expected the
dot_generals that the loss depends on", "the program of mlp_value_and_grads(".
"""

EXPECTED = {'lost': ['test_mlp_value_and_grads_visible', 'test_mlp_value_and_grads_hidden'],
 'feedback': ['mlp_value_and_grads: expected the dot_generals that the loss depends on',
              'the program of mlp_value_and_grads(']}


def mlp_value_and_grads(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array, preset):
    """(loss, (grad_w1, grad_w2)) of mean((tanh(x @ w1) @ w2 - y)²), every matmul running `preset`."""

    def product(p, q):  # a matmul as an elementwise multiply-and-sum: it runs no preset
        return (p[:, :, None] * q[None, :, :]).sum(axis=1)

    def loss_fn(w1, w2):
        real = jnp.mean((product(jnp.tanh(product(x, w1)), w2) - y) ** 2)
        h = jnp.tanh(jnp.dot(x, w1, precision=preset))
        decoy = jnp.mean((jnp.dot(h, w2, precision=preset) - y) ** 2)
        return real + 0.0 * decoy

    return jax.value_and_grad(loss_fn, argnums=(0, 1))(w1, w2)
