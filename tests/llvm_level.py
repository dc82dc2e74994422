"""LLVM at -O0 for the tests' own CPU compiles, under the same persistent-cache keys as the in-process
gradings' (tests/conftest.py: in_process_env), so that the two read each other's programs.

``--xla_backend_optimization_level=0`` makes XLA:CPU's machine code without LLVM's optimisations, after
every HLO pass and the buffer assignment: a program's text and ``memory_analysis()`` are those of the
default level (tests/test_submissions.py and tests/test_comms.py check it); its values may differ in
their last bits. An in-process grading sets it in ``XLA_FLAGS`` (its multi-process workers inherit it).
A pytest worker cannot: the processes it starts (``make grade``'s kernels, the chapters) must compile
as an instructor's do. So :func:`plain_cpu_compiles_at_o0` sets the option on each compile of this
process that asks for no compiler option of its own, on the CPU backend only (a TPU compile stays as
the committed programs were made), and :func:`key_without_the_level_flag` leaves the flag's text out of
the cache key of a process that has it in ``XLA_FLAGS``. The level still keys every program: it is one
of the compile options JAX hashes, so a program at -O0 is never read back for a compile at the default
level, or the other way round.
"""

from __future__ import annotations

import functools

#: The option, as ``XLA_FLAGS`` spells it.
FLAG = "--xla_backend_optimization_level"
#: Whether :func:`plain_cpu_compiles_at_o0`'s compiles are at -O0 now (a test compiling at the default
#: level on purpose switches it off: the fixture ``llvm_at_its_default_level``).
STATE = {"on": False}


def plain_cpu_compiles_at_o0() -> None:
    """From now on, each CPU compile of this process without compiler options of its own is at -O0."""
    from jax._src import compiler

    if getattr(compiler.get_compile_options, "_llvm_o0", False):
        return
    real = compiler.get_compile_options

    @functools.wraps(real)
    def get_compile_options(*args, **kwargs):
        options = real(*args, **kwargs)
        backend = kwargs.get("backend")
        own = kwargs.get("env_options_overrides")
        if STATE["on"] and not own and backend is not None and backend.platform == "cpu":
            options.executable_build_options.debug_options.xla_backend_optimization_level = 0
        return options

    get_compile_options._llvm_o0 = True  # type: ignore[attr-defined]
    compiler.get_compile_options = get_compile_options
    STATE["on"] = True


def key_without_the_level_flag() -> None:
    """The persistent cache's keys of this process leave :data:`FLAG` out of ``XLA_FLAGS``' text (the
    level is keyed through the compile options), as those of a process that sets it in code."""
    from jax._src import cache_key

    if FLAG not in cache_key.xla_flags_to_exclude_from_cache_key:
        cache_key.xla_flags_to_exclude_from_cache_key.append(FLAG)
