"""Pipeline all-gather: pipeline_forward all-gathers every stage's output and picks stage s's.
Right values, but no pipelining; the visible and hidden tests fail: "expected only collective-permute or
all-reduce, got all-gather" ... "never gather the stages' activations".
"""

EXPECTED = {'lost': ['test_pipeline_forward_visible', 'test_pipeline_forward_hidden'],
 'feedback': ['expected only collective-permute or all-reduce, got all-gather',
              "never gather the stages' activations"]}


def pipeline_forward(stage_params, x, mesh, n_micro):
    """The last stage's activations f32[B, D], replicated: a GPipe schedule with microbatches passed by ppermute."""
    n_stages = mesh.shape["stage"]

    def per_device(params, x):
        params = jax.tree.map(lambda a: a[0], params)
        h = x
        for s in range(n_stages):  # every device applies its stage; all share stage s's result
            everyone = jax.lax.all_gather(stage_fn(params, h), "stage")
            h = everyone[s]
        return h

    # check_vma=False: JAX cannot tell that h, taken from a gathered array, is the same on every device
    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("stage"), P()), out_specs=P(), check_vma=False)(
        stage_params, x
    )
