"""Process order: global_batch places each process's rows on its own devices, assuming mesh order.
Right only when the mesh lists processes in order; the visible and hidden tests use a mesh that does not:
"expected the dataset's rows in order 0…7, got ... [4, 5, 6, 7, 0, 1, 2, 3".
"""

EXPECTED = {'lost': ['test_global_batch_visible', 'test_global_batch_hidden'],
 'feedback': ["expected the dataset's rows in order 0…7, got rows holding dataset rows [4, 5, 6, "
              '7, 0, 1, 2, 3',
              'Place the rows where their process holds them first',
              # the hidden test's mesh, named with its device ids, and the process that saw it
              "Mesh({'X': 2, 'Y': 4}, Auto axes, device ids [2051, 2050, 2049, 2048, 3, 2, 1, 0])",
              'Hint: the rows must come out in dataset order',
              '(in process 0 of 2)']}


def global_batch(local_rows: np.ndarray, mesh: Mesh) -> jax.Array:
    """The dataset's rows, loaded in process order, as one array laid out P('X', None) on mesh."""
    # Each process's rows go to its own devices: right only when the mesh lists processes in order.
    return jax.make_array_from_process_local_data(NamedSharding(mesh, P("X", None)), local_rows)
