"""tools/notebooks.py: the CI checks over notebooks catch what they are for."""

import importlib.util
import shutil
import types

import nbformat
import pytest

from tests.notebooks import ROOT

spec = importlib.util.spec_from_file_location("nbtools", ROOT / "tools" / "notebooks.py")
nbtools = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nbtools)


def test_secret_lines_hold_solution_and_hidden_test_code():
    lines = nbtools.secret_lines()
    assert "return tuple(block)" not in lines  # too generic to count
    assert any("graders.check_per_device_shape(per_device_shape)" in line for line in lines)
    assert any("sums[position] = np.asarray(shard.data).sum()" in line for line in lines)


def test_leak_check_fails_on_a_planted_solution_line(tmp_path, monkeypatch):
    # A copy of the course whose student notebook carries one line of the instructor's solution.
    for name in ("solutions", "exercises"):
        shutil.copytree(ROOT / name, tmp_path / name)
    leaked = tmp_path / "exercises" / "01_meshes" / "01_meshes.ipynb"
    nb = nbformat.read(leaked, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("sums[position] = np.asarray(shard.data).sum()"))
    nbformat.write(nb, leaked)
    monkeypatch.setattr(nbtools, "ROOT", tmp_path)
    with pytest.raises(SystemExit):
        nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))
    nbformat.write(nbformat.read(ROOT / "exercises" / "01_meshes" / "01_meshes.ipynb", as_version=4), leaked)
    nbtools.cmd_leaks(types.SimpleNamespace(require_html=False))  # the clean copy passes


def test_quoted_figures_are_found_in_prose():
    text = "It moves 1.5 MiB (4,227,072 bytes) in 49.8 µs; 12 B per device."
    assert nbtools.QUOTED_FIGURE.findall(text) == [
        ("1.5", "MiB"),
        ("4,227,072", "bytes"),
        ("49.8", "µs"),
        ("12", "B"),
    ]
