"""shardbook/sources.py and the build's check of it (tools/prose.py): every TPU figure names its source."""

import nbformat
import pytest

from shardbook import Table, comms, cost, records, sources
from shardbook.comms import TpuProgram
from tests.test_cost import _TPU_SNIPPET
from tools import prose


def _program(**kw):
    return TpuProgram("v5e-8", "v5e", "0" * 64, {}, 16911433728, **kw)


def test_each_object_knows_its_source():
    # property: the tag comes from the object that made the figure: the compiler's program, the model
    # on a TPU program, the model on XLA:CPU's program, an entry of a real chip's record
    import jax
    import jax.numpy as jnp

    cpu = cost.estimate(comms.analyze(jax.jit(lambda a: a @ a), jnp.ones((64, 64))), chip="v5e")
    tpu = cost.estimate(comms.analyze_text(_TPU_SNIPPET), chip="v5e")
    entry = next(iter(records.tpu_record("v5e")["programs"].values()))
    assert sources.tag(_program(needs_bytes=2**34)) == "TPU compiler"
    assert (sources.tag(tpu), tpu.platform) == ("model · TPU program", "tpu")
    assert (sources.tag(cpu), cpu.platform) == ("model · XLA:CPU program", "cpu")
    assert sources.tag(entry) == "measured on a v5e"
    assert "(model · TPU program)" in repr(tpu) and "(model · XLA:CPU program)" in repr(cpu)
    with pytest.raises(TypeError, match="a bare number has no source"):
        sources.tag(0.5)


def test_a_table_says_its_source_once_in_its_caption():
    # property: Table(source=obj) ends the caption with obj's tag, in text and in HTML
    t = Table(["layout", "v5e ms"], [["FSDP", 631.1]], caption="8 chips", source=_program(needs_bytes=1))
    assert str(t).splitlines()[0] == "8 chips (TPU compiler)"
    assert "<caption>8 chips (TPU compiler)</caption>" in t._repr_html_()
    assert Table(["a"], source=_program(needs_bytes=1)).caption == "source: TPU compiler"


def test_what_counts_as_a_tpu_figure():
    # property: a time is a TPU figure unless said to be the CPU's; a memory size only when said of a
    # TPU's memory (not the bytes a collective sends); a printed time only when a TPU is named
    assert sources.is_tpu_figure("plain jit takes 59.8 µs")
    assert not sources.is_tpu_figure("on the CPU it takes 3.1 ms")
    assert sources.is_tpu_figure("its peak of 16.35 GiB is over the 15.75 GiB a chip has")
    assert not sources.is_tpu_figure("each chip sends 6.1 GiB")
    assert not sources.is_tpu_figure("one device 12.3 ms", printed=True)
    assert sources.is_tpu_figure("12.3", "run  v5e ms", printed=True) is False  # no unit on the row
    assert sources.is_tpu_figure("TPU v5e estimate: 69.0 µs per step", printed=True)
    assert sources.carries_source("plain jit 311 µs (*measured on a v5e*)")
    assert sources.carries_source("`memory_analysis` of the TPU compiler's program: 4 GiB")
    assert not sources.carries_source("the v5e estimate: 59.8 µs")


def _notebook(markdown, printed):
    cell = nbformat.v4.new_code_cell("print(x)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), cell])


def test_the_build_fails_on_a_tpu_figure_without_its_source():
    # property: tools/notebooks.py prose names each untagged TPU figure, in a sentence or printed;
    # the same figures with their tags pass
    bare = _notebook(
        "The ring takes 49.8 µs. Its peak on a v5e chip is 3.2 GiB. Each chip sends 1.5 MiB.",
        "TPU v5e estimate: 69.0 µs per step\none device 12.3 ms\n\n"
        "8 chips of a v5e-8\nlayout  v5e ms\n------  ------\nFSDP     631.1\n",
    )
    found = prose.unsourced_tpu_figures(bare)
    assert found == [
        'cell 0 says "The ring takes 49.8 µs." without its source',
        'cell 0 says "Its peak on a v5e chip is 3.2 GiB." without its source',
        'cell 1 prints "TPU v5e estimate: 69.0 µs per step" without its source',
        'cell 1 prints a table "8 chips of a v5e-8\nlayout  v5e ms" without its source',
    ]
    tagged = _notebook(
        "The ring takes 49.8 µs (*model · XLA:CPU program*). Its peak on a v5e chip is 3.2 GiB"
        " (*TPU compiler*). Each chip sends 1.5 MiB.",
        "TPU v5e estimate: 69.0 µs per step (model · TPU program)\none device 12.3 ms\n\n"
        "8 chips of a v5e-8 (model · TPU program)\nlayout  v5e ms\n------  ------\nFSDP     631.1\n",
    )
    assert prose.unsourced_tpu_figures(tagged) == []


def test_the_intro_legend_and_the_appendix_name_every_source():
    # property: the tags and their meanings are defined once (shardbook.sources); the intro's legend
    # shows each row word for word, *published* included, and the section "Where the numbers come
    # from" prints them from that one definition and describes each
    intro = (prose.ROOT / "book" / "intro.md").read_text()
    appendix = (prose.ROOT / "book" / "simulated_devices.md").read_text()
    for source in sources.LEGEND:
        assert f"| *{source.tag}* | {source.meaning} |" in intro, source.tag
        assert f"- *{source.tag}*:" in appendix, source.tag
    assert "numbers-sources" in intro and "for source in LEGEND:" in appendix


def test_a_paragraph_may_name_the_source_of_all_its_times_once():
    # property: "(tag, as every time in this paragraph)" covers the paragraph's sentences, not the next
    marked = _notebook(
        "The ring takes 49.8 µs (*model · XLA:CPU program*, as every time in this paragraph). "
        "Each permute takes 14.7 µs.\n\nPlain jit takes 59.8 µs.",
        "",
    )
    assert prose.unsourced_tpu_figures(marked) == [
        'cell 0 says "Plain jit takes 59.8 µs." without its source'
    ]
