"""Test configuration: 8 simulated CPU devices, chosen before any test starts JAX."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # grading/ is importable as a package in the tests

os.environ.setdefault("SHARDBOOK_DEVICES", "cpu")

import shardbook  # noqa: E402

shardbook.setup(quiet=True)
