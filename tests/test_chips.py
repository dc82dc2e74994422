"""A learner's own chips (shardbook/chips.py, setup's device plan): measured and printed, never asserted.

No accelerator is needed: the decision is forced by pretending the runtime has 8 of them, and the
measuring runs on the 8 simulated CPU devices handed in as the "chips".
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardbook
from shardbook import chips, claims

devices_setup = sys.modules["shardbook.setup"]  # the module; shardbook.setup is the function


def _build(devices):
    mesh = jax.make_mesh((2, 4), ("X", "Y"), devices=devices)
    a = jax.ShapeDtypeStruct((64, 128), jnp.float32, sharding=NamedSharding(mesh, P("X", "Y")))
    return jax.jit(lambda a: (a * 2).sum()), (a,)


@pytest.fixture
def eight_tpu_chips(monkeypatch):
    """A runtime with 8 TPU devices, as setup() would find on Kaggle's v5e-8 (started beside the CPU)."""
    monkeypatch.setattr(devices_setup, "count_accelerators", lambda: ("tpu", 8))
    monkeypatch.setattr(devices_setup, "_started_chips", lambda jax: "tpu")
    monkeypatch.setattr(devices_setup, "_PLAN", None)
    yield
    devices_setup._PLAN = None


def test_eight_chips_keep_the_reference_devices_as_the_default(eight_tpu_chips, capsys):
    # Property: with 8 accelerators the book's examples and checks still run on the 8 simulated CPU
    # devices; setup() says the chips are there and how they are used.
    summary = shardbook.setup("auto")
    lines = capsys.readouterr().out.splitlines()
    assert summary.simulated and summary.backend == "cpu" and len(jax.devices()) == 8
    assert lines[0].startswith("shardbook: 8 simulated CPU devices")
    assert lines[1].startswith("shardbook: this runtime also has 8 TPU devices. Every example and check runs")
    assert "measured on your chips and never checked against the text" in lines[1]
    assert devices_setup.on_reference_devices() and devices_setup.chips_platform() == "tpu"


def test_a_step_runs_on_the_chips_and_is_printed_as_measured(capsys):
    # Property: the step is compiled for and run on the devices handed in, its time printed with the
    # words "measured on your chips"; the result is a ChipMeasurement, not a number.
    measured = chips.on_your_chips(_build, "the doubled sum", devices=jax.devices())
    out = capsys.readouterr().out
    assert isinstance(measured, chips.ChipMeasurement) and measured.count == 8 and measured.seconds > 0
    assert out.startswith("measured on your chips (8 cpu): the doubled sum, ") and " ms a call" in out


def test_without_chips_nothing_runs_and_nothing_is_printed(capsys, monkeypatch):
    # Property: on a runtime without 8 accelerators (Colab's one chip, a laptop) the call is silent.
    monkeypatch.setattr(devices_setup, "_PLAN", None)
    assert chips.your_chips() is None
    assert chips.on_your_chips(_build, "the doubled sum") is None
    assert chips.on_your_chips(_build, "the doubled sum", devices=jax.devices()[:4]) is None
    assert capsys.readouterr().out == ""


def test_a_claim_refuses_a_value_measured_on_the_chips():
    # Property: no sentence of the book can rest on a learner's hardware.
    measured = chips.ChipMeasurement("the sum", "TPU v5 lite", 8, 1e-4)
    with pytest.raises(TypeError, match="measured on your chips"):
        claims.claim("the sum takes 0.1 ms", True, figures={"0.1": measured})
    with pytest.raises(TypeError, match="measured on your chips"):
        claims.claim("the sum is quick", measured)


def test_a_false_claim_is_printed_not_raised_off_the_reference_devices(monkeypatch, capsys):
    # Property: a learner who made the accelerators the default (SHARDBOOK_DEVICES=accelerator) is told
    # that a sentence does not hold there; the chapter goes on. On the reference devices it stops.
    with pytest.raises(claims.ClaimFailed):
        claims.claim("three is less than two", 3 < 2)
    monkeypatch.setattr(devices_setup, "_PLAN", devices_setup.DevicePlan("tpu", False, None))
    claims.claim("three is less than two", 3 < 2, because="3 >= 2")
    out = capsys.readouterr().out
    assert out.startswith("shardbook: not on the book's reference devices, so the text says")
    assert "three is less than two" in out and out.rstrip().endswith(": 3 >= 2")
    assert "three is less than two" not in claims.checked_claims()
