"""Saved mesh: restore_on differs from the reference solution.

Converted from wrong_saved_mesh.ipynb by `python -m tests.submissions convert 11_many_hosts`.
Dropped as copies of an older solution (their tests keep full marks): global_batch.
"""

EXPECTED = {'lost': ['test_restore_on_visible', 'test_restore_on_hidden'],
 'feedback': ["on Mesh({'X': 2, 'Y': 4}",
              'a restore without a target uses the mesh it was saved from']}


def restore_on(mesh: Mesh, path: str) -> dict:
    """The checkpoint at path, each array laid out on mesh with the spec it was saved with."""
    # Restores onto the mesh it was saved from, whatever mesh is asked for.
    return ocp.StandardCheckpointer().restore(path)
