"""Saved mesh: restore_on restores without a target, so the arrays land on the mesh they were saved from.
Right values, wrong layout; the visible and hidden tests restore onto another mesh ("on Mesh({'X': 2,
'Y': 4}"): "a restore without a target uses the mesh it was saved from".
"""

EXPECTED = {'lost': ['test_restore_on_visible', 'test_restore_on_hidden'],
 'feedback': ["on Mesh({'X': 2, 'Y': 4}",
              'a restore without a target uses the mesh it was saved from',
              'on another mesh',
              "expected 'w' as float32[8,16] sharded P('X', 'Y') on the mesh given, got float32[8,16] "
              "sharded P('X', 'Y') on Mesh({'X': 2, 'Y': 4}"]}


def restore_on(mesh: Mesh, path: str) -> dict:
    """The checkpoint at path, each array laid out on mesh with the spec it was saved with."""
    # Restores onto the mesh it was saved from, whatever mesh is asked for.
    return ocp.StandardCheckpointer().restore(path)
