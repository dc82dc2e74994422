"""grading/protocol.py: the one module that names what crosses a process boundary while grading.

That its config options reach the preprocessors in a forked nbgrader child is shown in
tests/test_nbgrader_process.py (it runs nbgrader)."""

import re
from pathlib import Path

import numpy as np
import pytest

from grading import protocol, tamper
from shardbook.checks import CheckFailed

ROOT = Path(__file__).resolve().parents[1]


def test_the_death_record_reads_back_what_was_written(tmp_path):
    death = protocol.Death(7, "shape_test")
    death.write(tmp_path / protocol.DEATH_FILE_NAME)
    assert protocol.Death.read(tmp_path / protocol.DEATH_FILE_NAME) == death
    assert protocol.Death.read(tmp_path / "none.json") is None
    assert protocol.Death.from_json(protocol.Death(3).to_json()) == protocol.Death(3, None)
    assert protocol.Death(3).where() == "cell 3"
    assert death.where() == "cell 7 (shape_test)"


def test_the_tamper_finding_the_kernel_raises_is_the_one_the_worker_reads(monkeypatch):
    monkeypatch.setattr(np, "allclose", lambda *a, **k: True)
    with pytest.raises(CheckFailed) as raised:
        tamper.assert_untampered()
    finding = protocol.Tampering.parse("CheckFailed: " + str(raised.value))  # as an error output shows it
    assert finding is not None and finding.found[0].startswith("numpy.allclose (now from ")
    assert protocol.Tampering.parse(finding.message()) == finding
    assert protocol.Tampering.parse("CheckFailed: expected 2, got 3.") is None


def test_autograde_options_name_the_preprocessors_traits(tmp_path):
    from grading.preprocessors import ExecuteRecordingDeaths, SkipCells

    options = protocol.autograde_options([4, 7], tmp_path / "d.json", 30)
    assert options == [
        f"--ExecuteRecordingDeaths.death_file={tmp_path / 'd.json'}",
        "--Execute.timeout=30",
        "--SkipCells.skip=4",
        "--SkipCells.skip=7",
    ]
    assert SkipCells.class_traits(config=True).keys() >= {"skip"}
    assert ExecuteRecordingDeaths.class_traits(config=True).keys() >= {"death_file", "timeout"}


def test_no_other_file_spells_a_name_that_crosses_a_process_boundary():
    names = [
        protocol.COURSE_ROOT_ENV,
        protocol.SANDBOX_ENV,
        protocol.UID_ENV,
        protocol.NPROC_ENV,
        protocol.Tampering.PREFIX.strip(": "),
        "SHARDBOOK_SKIP_CELLS",  # the variables the protocol replaced
        "SHARDBOOK_DEATH_FILE",
        "SHARDBOOK_CELL_TIMEOUT",
    ]
    spelt = re.compile("|".join(re.escape(f'"{name}') for name in names))
    here = Path(__file__).resolve()
    found = [
        str(path.relative_to(ROOT))
        for folder in ("grading", "shardbook", "tools", "tests", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if path not in (here, ROOT / "grading" / "protocol.py") and spelt.search(path.read_text())
    ]
    assert not found, f"spell these through grading.protocol: {found}"
