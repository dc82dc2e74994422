"""Tests of shardbook.pipeline: the GPipe and 1F1B schedule tables, their bubble and kept activations."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from shardbook import pipeline  # noqa: E402

CASES = [(1, 1), (1, 4), (2, 3), (4, 4), (4, 8), (3, 7), (8, 2)]


def _check_dependencies(table, stages, micro):
    ran = {}
    for t, row in enumerate(table):
        assert len(row) == stages
        for s, action in enumerate(row):
            if action is None:
                continue
            kind, m = action
            assert (kind, m, s) not in ran, f"{kind}{m} twice on stage {s}"
            ran[(kind, m, s)] = t
            if kind == "F" and s > 0:
                assert ran[("F", m, s - 1)] < t
            if kind == "B":
                before = ("F", m, s) if s == stages - 1 else ("B", m, s + 1)
                assert ran[before] < t
    assert len(ran) == 2 * stages * micro  # every microbatch forward and backward on every stage


@pytest.mark.parametrize("kind", pipeline.SCHEDULES)
@pytest.mark.parametrize(("stages", "micro"), CASES)
def test_pipeline_schedule_respects_dependencies_and_length(kind, stages, micro):
    # property: a valid schedule of 2(M + S - 1) ticks, whose bubble is 2 S (S - 1) idle stage-ticks
    table = pipeline.pipeline_schedule(stages, micro, kind)
    _check_dependencies(table, stages, micro)
    assert len(table) == 2 * (micro + stages - 1)
    assert pipeline.idle_steps(table) == 2 * stages * (stages - 1)


@pytest.mark.parametrize(("stages", "micro"), CASES)
def test_held_activations_gpipe_keeps_all_and_1f1b_keeps_stages_minus_s(stages, micro):
    # property: GPipe keeps M activations per stage; 1F1B keeps min(M, S - s) on stage s
    gpipe = pipeline.pipeline_schedule(stages, micro, "gpipe")
    one_f_one_b = pipeline.pipeline_schedule(stages, micro, "1f1b")
    assert [pipeline.held_activations(gpipe, s) for s in range(stages)] == [micro] * stages
    assert [pipeline.held_activations(one_f_one_b, s) for s in range(stages)] == [
        min(micro, stages - s) for s in range(stages)
    ]


def test_pipeline_schedule_1f1b_interleaves_and_gpipe_does_not():
    # property: under 1F1B the first stage runs a backward before its last forward; under GPipe never
    def first_stage(kind):
        return [a[0] for a in (row[0] for row in pipeline.pipeline_schedule(4, 8, kind)) if a]

    gpipe, one_f_one_b = first_stage("gpipe"), first_stage("1f1b")
    assert gpipe == ["F"] * 8 + ["B"] * 8
    assert one_f_one_b.index("B") < 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((4, 8, "zero-bubble"), "unknown schedule 'zero-bubble'"),
        ((0, 8), "at least one stage"),
        ((4, 0), "got 4 and 0"),
    ],
)
def test_pipeline_schedule_refuses_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        pipeline.pipeline_schedule(*args)


def test_draw_pipeline_schedule_one_cell_per_stage_tick():
    # property: one rectangle per (tick, stage), labelled with its microbatch, grey when idle
    table = pipeline.pipeline_schedule(3, 5, "1f1b")
    ax = pipeline.draw_pipeline_schedule(table, title="t")
    assert len(ax.patches) == len(table) * 3
    assert len(ax.texts) == 2 * 3 * 5
    greys = [p for p in ax.patches if matplotlib.colors.to_hex(p.get_facecolor()) == "#dddddd"]
    assert len(greys) == pipeline.idle_steps(table)
    assert ax.get_title() == "t"


def test_shardbook_exports_the_pipeline_helpers():
    import shardbook

    assert shardbook.pipeline_schedule is pipeline.pipeline_schedule
    assert shardbook.draw_pipeline_schedule is pipeline.draw_pipeline_schedule


@pytest.mark.parametrize("stages,micro", [(2, 3), (4, 8), (3, 5)])
def test_schedule_seconds_lockstep_and_as_inputs_arrive(stages, micro):
    # Run as soon as inputs arrive, GPipe and 1F1B take (M + S - 1)(F + B): the same bubble whatever
    # the order. In lockstep a tick lasts its slowest stage: equal when F = B, 1F1B slower when B > F
    # (it runs more ticks that hold a backward); never faster than the asynchronous run.
    gpipe, ofob = (pipeline.pipeline_schedule(stages, micro, k) for k in ("gpipe", "1f1b"))
    for table in (gpipe, ofob):
        assert pipeline.schedule_seconds(table, 1.0, 3.0, lockstep=False) == (micro + stages - 1) * 4.0
        assert pipeline.schedule_seconds(table, 2.0, 2.0) == (micro + stages - 1) * 4.0
        assert pipeline.schedule_seconds(table, 1.0, 3.0) >= pipeline.schedule_seconds(
            table, 1.0, 3.0, lockstep=False
        )
    assert pipeline.schedule_seconds(ofob, 1.0, 3.0) > pipeline.schedule_seconds(gpipe, 1.0, 3.0)
    # A hop is paid once per tick in lockstep.
    assert pipeline.schedule_seconds(gpipe, 1.0, 1.0, hop=0.5) == len(gpipe) * 1.5
