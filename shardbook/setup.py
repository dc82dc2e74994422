"""Device setup: the one call at the top of every notebook.

``setup()`` makes every notebook of the book run the same way on a Colab TPU, a multi-chip TPU, a GPU
or a laptop: with 8 or more accelerators it uses them; with fewer it asks JAX for 8 simulated CPU
devices, which must happen before JAX starts its first backend. On Colab it first installs the JAX
version the book is tested with.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from packaging.version import Version

#: The JAX release every notebook of the book is executed with in CI.
PINNED_JAX = "0.12.0.1"
#: The oldest JAX with the APIs the book uses (jax.shard_map, jax.typeof, jax.reshard, DotAlgorithmPreset).
MIN_JAX = "0.12.0"
#: Where the book's source lives; Colab installs the helper package from here.
REPOSITORY = "https://github.com/sharding-in-jax/sharding-in-jax"
#: How many devices every example is written for.
NUM_DEVICES = 8


class SetupError(RuntimeError):
    """Raised when the devices cannot be set up; the message says what to do."""


@dataclass(frozen=True)
class DeviceSummary:
    """What ``setup`` chose: the backend, how many devices, and whether they are simulated."""

    backend: str
    count: int
    simulated: bool
    jax_version: str

    def _ipython_display_(self) -> None:
        """Shows nothing: ``setup()`` has already printed this line when it ends a notebook cell."""

    def __str__(self) -> str:
        kind = (
            f"{self.count} simulated CPU devices"
            if self.simulated
            else f"{self.count} {self.backend} devices"
        )
        return f"shardbook: {kind} · backend {self.backend} · JAX {self.jax_version}"


def in_colab() -> bool:
    """Whether this Python runs inside a Google Colab runtime."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def count_accelerators() -> tuple[str, int]:
    """Counts TPU chips or NVIDIA GPUs on this machine without starting JAX.

    Returns:
      ``(kind, count)`` with kind ``'tpu'``, ``'gpu'`` or ``'cpu'`` (count 0 for ``'cpu'``).
    """
    # TPU VMs expose one device file per chip: /dev/accel0… (v2–v4) or /dev/vfio/0… (v5e and later).
    tpu_files = glob.glob("/dev/accel[0-9]*") or [
        p for p in glob.glob("/dev/vfio/*") if re.fullmatch(r".*/\d+", p)
    ]
    if tpu_files:
        return "tpu", len(tpu_files)
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        gpus = [line for line in out.splitlines() if line.startswith("GPU ")]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.strip() != "":
            gpus = gpus[: len([v for v in visible.split(",") if v.strip()])]
        if gpus:
            return "gpu", len(gpus)
    return "cpu", 0


def _installed_jax_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("jax")
    except Exception:
        return None


def _install_pinned_jax(kind: str) -> None:
    extra = {"tpu": "[tpu]", "gpu": "[cuda12]"}.get(kind, "")
    print(f"shardbook: installing jax{extra}=={PINNED_JAX} (about a minute)…")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"jax{extra}=={PINNED_JAX}"], check=True)


def _backends_started() -> bool:
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def choose_devices(kind: str, count: int, devices: str = "auto") -> bool:
    """Decides whether to simulate: True when the book should run on simulated CPU devices.

    Args:
      kind: ``'tpu'``, ``'gpu'`` or ``'cpu'``, as from :func:`count_accelerators`.
      count: how many accelerators of that kind there are.
      devices: ``'auto'`` (accelerators if there are at least 8, else simulate), ``'cpu'`` (always
        simulate) or ``'accelerator'`` (never simulate).

    Raises:
      ValueError: for any other value of ``devices``.
    """
    if devices not in ("auto", "cpu", "accelerator"):
        raise ValueError(f"devices must be 'auto', 'cpu' or 'accelerator', got {devices!r}")
    if devices == "cpu":
        return True
    if devices == "accelerator":
        return False
    return kind == "cpu" or count < NUM_DEVICES


def setup(devices: str | None = None, *, quiet: bool = False) -> DeviceSummary:
    """Prepares JAX for the book and prints one line saying which devices it uses.

    Call it once, at the top of a notebook, before any other JAX call.

    Args:
      devices: ``'auto'`` (default; also read from the ``SHARDBOOK_DEVICES`` environment variable),
        ``'cpu'`` to force 8 simulated CPU devices, or ``'accelerator'`` to use whatever
        accelerators exist even if there are fewer than 8.
      quiet: do not print the summary line.

    Returns:
      A :class:`DeviceSummary`.

    Raises:
      SetupError: JAX is too old, or it already started with fewer than 8 devices.

    Example:
      >>> import shardbook
      >>> shardbook.setup()  # doctest: +SKIP
      shardbook: 8 simulated CPU devices · backend cpu · JAX 0.12.0.1
    """
    devices = devices or os.environ.get("SHARDBOOK_DEVICES", "auto")
    kind, count = count_accelerators()
    _show_setup_errors_briefly()

    if in_colab():
        installed = _installed_jax_version()
        if installed != PINNED_JAX or (kind == "tpu" and not _has_module("libtpu")):
            already_imported = "jax" in sys.modules
            _install_pinned_jax(kind)
            if already_imported:
                raise SetupError(
                    f"JAX {installed} was already imported, so the new JAX {PINNED_JAX} needs a fresh start: "
                    "choose Runtime → Restart session, then run this cell again."
                )

    import jax

    if Version(jax.__version__) < Version(MIN_JAX):
        raise SetupError(
            f"This book needs JAX {MIN_JAX} or newer and found {jax.__version__}: "
            f'run  pip install -U "jax=={PINNED_JAX}"  and restart Python.'
        )

    simulate = choose_devices(kind, count, devices)
    if _backends_started():
        found = jax.devices()
        if len(found) < NUM_DEVICES:
            raise SetupError(
                f"JAX already started with {len(found)} {found[0].platform} device(s), and the number of "
                f"simulated devices can only be chosen before that: restart Python and run the setup cell "
                f"before any other JAX code."
            )
    else:
        if simulate:
            jax.config.update("jax_platforms", "cpu")
            jax.config.update("jax_num_cpu_devices", NUM_DEVICES)
        found = jax.devices()
    summary = DeviceSummary(
        backend=found[0].platform,
        count=len(found),
        simulated=found[0].platform == "cpu",
        jax_version=jax.__version__,
    )
    if not quiet:
        print(summary)
    return summary


def _has_module(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


def _show_setup_errors_briefly() -> None:
    """In IPython, prints a SetupError as one sentence instead of a traceback."""
    try:
        ip = get_ipython()  # type: ignore[name-defined]  # noqa: F821
    except NameError:
        return

    def _one_line(shell, etype, value, tb, tb_offset=None):
        print(f"SetupError: {value}", file=sys.stderr)

    ip.set_custom_exc((SetupError,), _one_line)
