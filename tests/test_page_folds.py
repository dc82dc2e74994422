"""tools/page_folds.py: a pop quiz's answer and the setup cell stay folded on the built page without
JavaScript."""

import re

import nbformat

from tests.notebooks import sphinx_page
from tools.notebooks import SETUP_MARK

QUIZ = """**Pop quiz.** How many bytes?

```{admonition} Answer
:class: dropdown
**Bytes.** 3 × 512 × 512 × 2 = 1,572,864.
```

```{note}
An open note stays open.
```
"""


def test_a_quiz_answer_is_a_details_element_and_other_admonitions_are_left_alone(tmp_path):
    # Property: the answer is inside a closed <details> (no `open` attribute), its title the summary;
    # a plain admonition is not folded, and no element keeps the class sphinx-togglebutton's script
    # looks for (it would add a second button).
    cells = [nbformat.v4.new_markdown_cell(QUIZ)]
    page, warnings = sphinx_page(
        tmp_path, cells, "tools.page_folds", config="extensions.append('sphinx_design')\n"
    )
    # (a second Sphinx app in one process warns that node classes are registered again: not ours)
    ours = [w for w in warnings.splitlines() if "WARNING" in w and "already registered" not in w]
    assert not ours, warnings
    details = re.search(r"<details[^>]*>(.*?)</details>", page, re.S)
    assert details is not None, page
    assert " open" not in details.group(0).split(">", 1)[0]
    assert "<summary" in details.group(1) and "Answer" in details.group(1).split("</summary>")[0]
    assert "1,572,864" in details.group(1)
    assert "1,572,864" not in page.replace(details.group(0), "")
    assert "An open note stays open." not in details.group(0)
    assert "admonition dropdown" not in page


def test_the_setup_cell_code_is_folded_and_its_output_shown(tmp_path):
    # Property: the first code cell, when it is the setup cell, has its input in a <details> and its
    # output outside; a page whose first code cell is something else is left alone.
    setup = nbformat.v4.new_code_cell(SETUP_MARK + "\nimport shardbook\nshardbook.setup()")
    setup.outputs = [nbformat.v4.new_output("stream", name="stdout", text="shardbook: 8 devices\n")]
    other = nbformat.v4.new_code_cell("x = 1")
    (tmp_path / "a").mkdir()
    page, _ = sphinx_page(tmp_path / "a", [setup, other], "tools.page_folds")
    fold = re.search(r"<details[^>]*>(.*?)</details>", page, re.S)
    assert fold is not None and "Show the setup cell" in fold.group(1), page
    assert "shardbook.setup()" in re.sub(r"<[^>]+>", "", fold.group(1))
    assert "shardbook: 8 devices" in page and "shardbook: 8 devices" not in fold.group(1)
    assert page.count("<details") == 1  # the second cell is not folded

    (tmp_path / "b").mkdir()
    plain, _ = sphinx_page(tmp_path / "b", [other, setup], "tools.page_folds")
    assert "<details" not in plain
