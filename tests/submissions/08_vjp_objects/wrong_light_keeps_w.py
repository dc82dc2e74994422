"""Light keeps w: light_vjp calls plain jax.vjp, so the VJP object saves a copy of w.
Right cotangents, but the visible and hidden tests look at the residuals: "expected no copy of w", with a
hint that saveable_args marks them False.
"""

EXPECTED = {'lost': ['test_light_vjp_visible', 'test_light_vjp_hidden'],
 'feedback': ['expected no copy of w', 'saveable_args marks them False']}


def light_vjp(f, w, x):
    """(f(w, x), f_vjp) where f_vjp saves no copy of w; restore w with args_res[0] before use."""
    return jax.vjp(f, w, x)
