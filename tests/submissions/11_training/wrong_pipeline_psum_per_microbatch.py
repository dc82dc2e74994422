"""Psum per microbatch: pipeline_forward broadcasts each finished microbatch with its own psum.
Plausible: the same bytes as one psum of the whole output, and each psum is small; but the contract's target
is one all-reduce, and each collective is a synchronisation of every stage (on a real network, a latency
paid n_micro times). The visible and hidden tests count the all-reduces: "expected one all-reduce (the
output, once), got 4" ... "psum the stacked outputs once, after the loop".
"""

EXPECTED = {'lost': ['test_pipeline_forward_visible', 'test_pipeline_forward_hidden'],
 'feedback': ['expected one all-reduce (the output, once), got 4',
              'psum the stacked outputs once, after the loop']}


def pipeline_forward(stage_params, x, mesh, n_micro):
    """The last stage's activations f32[B, D], replicated: a GPipe schedule with microbatches passed by ppermute."""
    n_stages = mesh.shape["stage"]
    steps = n_micro + n_stages - 1

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
        # each finished microbatch broadcast on its own
        outputs = [jax.lax.psum(jnp.where(stage == n_stages - 1, out, 0.0), "stage") for out in outputs]
        return jnp.concatenate(outputs)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P())(stage_params, x)
