"""Sequential: pipeline_forward pushes one microbatch at a time through all stages.
Right values with only permutes, but no overlap; the visible and hidden tests count steps: "expected ... 11
steps, got 32" ("one microbatch at a time through all stages takes n_micro · S steps").
"""

EXPECTED = {'lost': ['test_pipeline_forward_visible', 'test_pipeline_forward_hidden'],
 'feedback': ['expected n_micro + S - 1 = 4 + 8 - 1 = 11 steps, got 32',
              'one microbatch at a time through all stages takes n_micro · S steps']}


def pipeline_forward(stage_params, x, mesh, n_micro):
    """The last stage's activations f32[B, D], replicated: a GPipe schedule with microbatches passed by ppermute."""
    n_stages = mesh.shape["stage"]

    def per_device(params, x):
        params = jax.tree.map(lambda a: a[0], params)
        stage = jax.lax.axis_index("stage")
        micro = x.reshape(n_micro, x.shape[0] // n_micro, x.shape[1])
        to_next = [(s, (s + 1) % n_stages) for s in range(n_stages)]
        outputs = []
        for m in range(n_micro):  # one microbatch at a time through every stage
            held = jnp.where(stage == 0, micro[m], jnp.zeros_like(micro[m]))
            for s in range(n_stages):
                held = stage_fn(params, held)
                if s < n_stages - 1:
                    held = jax.lax.ppermute(held, "stage", to_next)
            outputs.append(jax.lax.psum(jnp.where(stage == n_stages - 1, held, 0.0), "stage"))
        return jnp.concatenate(outputs)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P())(stage_params, x)
