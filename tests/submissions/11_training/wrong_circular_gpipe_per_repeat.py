"""GPipe once per repeat: circular_forward calls Exercise 11.3's pipeline_forward V times, repeat v's
layers w[v] as its stages and n_micro = S, so each pass drains before the next fills. Values are right,
but the visible and hidden tests count V · (n_micro + S - 1) steps: "expected V · n_micro + S - 1 =
2 · 8 + 8 - 1 = 23 steps, got 30", "11.3's pipeline once per repeat".
"""

EXPECTED = {'lost': ['test_circular_forward_visible', 'test_circular_forward_hidden'],
 'feedback': ['expected V · n_micro + S - 1 = 2 · 8 + 8 - 1 = 23 steps, got 30',
              "11.3's pipeline once per repeat",
              "Exercise 11.3's pipeline run V times"]}


def circular_forward(stage_params, x, mesh):
    """Layers 0 ... V*S - 1 applied to x, replicated f32[B, D]."""
    n_stages = mesh.shape["stage"]
    h = x
    for v in range(stage_params["w"].shape[0]):  # repeat v: stages w[v, 0] ... w[v, S - 1]
        h = pipeline_forward(jax.tree.map(lambda a: a[v], stage_params), h, mesh, n_stages)
    return h
