"""Light keeps w: light_vjp differs from the reference solution.

Converted from wrong_light_keeps_w.ipynb by `python -m tests.submissions convert 08_vjp_objects`.
"""

EXPECTED = {'lost': ['test_light_vjp_visible', 'test_light_vjp_hidden'],
 'feedback': ['expected no copy of w', 'saveable_args marks them False']}


def light_vjp(f, w, x):
    """(f(w, x), f_vjp) where f_vjp saves no copy of w; restore w with args_res[0] before use."""
    return jax.vjp(f, w, x)
