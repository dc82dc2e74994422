"""Extra step: pipeline_forward loops n_micro + n_stages times, one more than n_micro + S - 1.
An off-by-one on the drain; values stay right, but the visible and hidden tests count steps: "expected
n_micro + S - 1 = 4 + 8 - 1 = 11 steps, got 12".
"""

EXPECTED = {'lost': ['test_pipeline_forward_visible', 'test_pipeline_forward_hidden'],
 'feedback': ['expected n_micro + S - 1 = 4 + 8 - 1 = 11 steps, got 12',
              'loop over exactly range(n_micro + n_stages - 1)']}


def pipeline_forward(stage_params, x, mesh, n_micro):
    """The last stage's activations f32[B, D], replicated: a GPipe schedule with microbatches passed by ppermute."""
    n_stages = mesh.shape["stage"]
    steps = n_micro + n_stages  # every microbatch, then the pipeline drains

    def per_device(params, x):
        params = jax.tree.map(lambda a: a[0], params)  # this device's stage
        stage = jax.lax.axis_index("stage")
        micro = x.reshape(n_micro, x.shape[0] // n_micro, x.shape[1])
        to_next = [(s, (s + 1) % n_stages) for s in range(n_stages)]

        def step(t, carry):
            held, outputs = carry
            held = jnp.where(stage == 0, micro[jnp.minimum(t, n_micro - 1)], held)
            held = stage_fn(params, held)
            finished = t - (n_stages - 1)
            is_output = (stage == n_stages - 1) & (finished >= 0)
            outputs = jnp.where(is_output, outputs.at[jnp.maximum(finished, 0)].set(held), outputs)
            return jax.lax.ppermute(held, "stage", to_next), outputs

        start = jax.lax.pcast((jnp.zeros_like(micro[0]), jnp.zeros_like(micro)), "stage", to="varying")
        _, outputs = jax.lax.fori_loop(0, steps, step, start)
        outputs = jax.lax.psum(jnp.where(stage == n_stages - 1, outputs, 0.0), "stage")
        return outputs.reshape(x.shape)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P())(stage_params, x)
