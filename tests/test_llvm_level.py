"""tests/llvm_level.py: the tests' plain CPU compiles at LLVM -O0, sharing the in-process gradings'
programs in the session's compilation cache, and never a program of the default level."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import llvm_level, submissions
from tests.conftest import compilation_cache, in_process_env

# A program no other test compiles: a sum of sines over a shape of its own.
PROGRAM = "jax.jit(lambda x: jnp.sin(x).sum() * 3.25)(np.ones((7, 13, 3), np.float32))"

IN_PROCESS = textwrap.dedent(
    f"""
    import os, sys
    import jax, jax.numpy as jnp, numpy as np
    import shardbook
    from tests import llvm_level
    shardbook.setup(quiet=True)  # as the notebook's imports cell, and the tests' conftest
    assert llvm_level.FLAG in os.environ["XLA_FLAGS"]
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    llvm_level.key_without_the_level_flag()
    {PROGRAM}.block_until_ready()
    """
)


def _use_cache(folder) -> None:
    """This process's persistent compilation cache is ``folder`` from its next compile on."""
    from jax._src import compilation_cache

    jax.config.update("jax_compilation_cache_dir", str(folder))
    compilation_cache.reset_cache()


def _entries(folder) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_a_plain_compile_here_is_the_in_process_gradings_program_and_not_the_default_levels(
    tmp_path_factory, tmp_path
):
    # property: a process graded in-process (XLA_FLAGS at -O0, as conftest.in_process_env sets it)
    # reads back the program a pytest worker compiled plainly (no new cache entry); the same program
    # compiled at LLVM's default level is another entry (it is never read back for an -O0 one).
    cache = tmp_path / "jax-cache"
    _use_cache(cache)
    try:
        eval(PROGRAM, {"jax": jax, "jnp": jnp, "np": np}).block_until_ready()
        mine = _entries(cache)
        assert len(mine) == 1, mine
        env = dict(os.environ, **in_process_env(tmp_path_factory), PYTHONPATH=str(submissions.ROOT))
        env.pop("JAX_COMPILATION_CACHE_DIR")
        run = subprocess.run(
            [sys.executable, "-c", IN_PROCESS, str(cache)], env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert _entries(cache) == mine, "the in-process grading compiled the program again"
        llvm_level.STATE["on"] = False
        try:  # a new function object: traced and compiled again, at the default level
            eval(PROGRAM, {"jax": jax, "jnp": jnp, "np": np}).block_until_ready()
        finally:
            llvm_level.STATE["on"] = True
        assert len(_entries(cache) - mine) == 1, "the default level read the -O0 program back"
    finally:
        _use_cache(compilation_cache(tmp_path_factory))


def _level(own: dict, backend) -> int:
    from jax._src import compiler

    options = compiler.get_compile_options(
        num_replicas=1, num_partitions=1, env_options_overrides=own, backend=backend
    )
    return options.executable_build_options.debug_options.xla_backend_optimization_level


def test_a_compile_with_options_of_its_own_or_for_another_backend_is_left_as_asked():
    # property: only a CPU compile that asks for no compiler option gets -O0 (the analyzer's copies
    # ask for theirs; a TPU compile, here one for no CPU backend, keeps the level the committed
    # programs were compiled at).
    cpu = jax.devices("cpu")[0].client
    assert _level({}, cpu) == 0
    assert _level({"xla_cpu_enable_fast_math": False}, cpu) != 0
    assert _level({}, None) != 0


@pytest.mark.usefixtures("llvm_at_its_default_level")
def test_the_fixture_gives_a_test_the_default_level():
    # property: a test that compares the levels (tests/test_submissions.py) compiles plainly at LLVM's
    # default level while it holds the fixture
    assert _level({}, jax.devices("cpu")[0].client) != 0
