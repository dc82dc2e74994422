"""All parameter lines: entry_block_shapes differs from the reference solution.

Converted from wrong_all_parameter_lines.ipynb by `python -m tests.submissions convert 02_auto_sharding`.
Dropped as copies of an older solution (their tests keep full marks): block_means_jit, reduce_scatter_matmul, constrained_mlp.
"""

EXPECTED = {'lost': ['test_entry_block_shapes_visible', 'test_entry_block_shapes_hidden'],
 'feedback': ['computation marked ENTRY']}


def entry_block_shapes(hlo_text: str) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
    """The per-device shapes of the ENTRY computation's parameters and result in compiled HLO text."""
    import re

    def dims(text):
        return tuple(int(n) for n in text.split(",") if n)

    # every parameter line in the whole text, and the last ROOT line
    params = [dims(m) for m in re.findall(r"= \w+\[([\d,]*)\]\S* parameter\(", hlo_text)]
    result = dims(re.findall(r"ROOT \S+ = \w+\[([\d,]*)\]", hlo_text)[-1])
    return params, result
