"""shardbook.setup: device choice, the summary line, and clear errors."""

import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest
import yaml

import shardbook

devices_setup = sys.modules["shardbook.setup"]  # the module; shardbook.setup is the function

ROOT = Path(__file__).resolve().parents[1]


def test_setup_gives_eight_simulated_devices():
    # conftest ran setup(); on a machine without accelerators that means 8 CPU devices.
    assert len(jax.devices()) == 8 and jax.devices()[0].platform == "cpu"


def test_setup_again_is_harmless_and_prints_one_line(capsys):
    # Running the setup cell twice (as learners do) neither fails nor changes the devices.
    summary = shardbook.setup()
    line = capsys.readouterr().out.strip()
    assert summary.count == 8 and summary.simulated
    assert re.fullmatch(r"shardbook: 8 simulated CPU devices · backend cpu · JAX [\d.]+", line), line


@pytest.mark.parametrize(
    ("kind", "count", "devices", "simulate"),
    [
        ("cpu", 0, "auto", True),
        ("gpu", 1, "auto", True),  # one GPU: simulate 8 CPU devices
        ("tpu", 1, "auto", True),  # Colab's free single-chip TPU
        ("tpu", 8, "auto", False),  # a v5e-8: use the chips
        ("gpu", 2, "accelerator", False),
        ("tpu", 8, "cpu", True),
    ],
)
def test_choose_devices(kind, count, devices, simulate):
    assert devices_setup.choose_devices(kind, count, devices) is simulate


def test_choose_devices_rejects_unknown_choice():
    with pytest.raises(ValueError, match="'auto', 'cpu' or 'accelerator', got 'gpu'"):
        devices_setup.choose_devices("cpu", 0, "gpu")


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SHARDBOOK_DEVICES="auto")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_setup_after_jax_started_with_too_few_devices_says_what_to_do():
    # A learner who used JAX before the setup cell gets one sentence, not a traceback from JAX.
    result = _run(
        "import jax, jax.numpy as jnp; jnp.zeros(1)\n"
        "import shardbook\n"
        "try:\n    shardbook.setup()\nexcept shardbook.SetupError as e:\n    print('MESSAGE', e)\n"
    )
    assert "MESSAGE JAX already started with 1 cpu device(s)" in result.stdout, result.stderr
    assert "restart Python and run the setup cell" in result.stdout


def test_too_old_jax_is_refused_in_one_sentence(monkeypatch):
    monkeypatch.setattr(jax, "__version__", "0.4.30")
    with pytest.raises(shardbook.SetupError, match=r"needs JAX 0\.12\.0 or newer and found 0\.4\.30"):
        shardbook.setup(quiet=True)


def test_summary_is_not_displayed_twice():
    # The setup cell ends with shardbook.setup(): Jupyter must not print the summary a second time.
    summary = shardbook.setup(quiet=True)
    assert summary._ipython_display_() is None


def test_repository_url_is_configured_once():
    # The Colab buttons (_config.yml), the helper's install URL and every setup cell agree.
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == shardbook.REPOSITORY
    for path in list((ROOT / "book").glob("*.ipynb")) + list((ROOT / "exercises").glob("*/*.ipynb")):
        text = path.read_text()
        urls = set(re.findall(r"https://github\.com/[\w-]+/[\w-]+", text)) | set(
            re.findall(r"colab\.research\.google\.com/github/([\w-]+/[\w-]+)", text)
        )
        for url in urls:
            assert shardbook.REPOSITORY.endswith(url.removeprefix("https://github.com/")), (path.name, url)


def test_pinned_jax_matches_requirements():
    requirements = (ROOT / "requirements.txt").read_text()
    assert f"jax=={shardbook.PINNED_JAX}" in requirements
