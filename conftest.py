"""pytest, for every test folder and for the doctests of shardbook/ (``make unit``): JAX starts with the
8 simulated CPU devices the book is written for, chosen before anything starts a backend."""

import os

os.environ.setdefault("SHARDBOOK_DEVICES", "cpu")

import shardbook  # noqa: E402

shardbook.setup(quiet=True)
