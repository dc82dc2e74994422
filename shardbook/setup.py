"""Device setup: the one call at the top of every notebook.

``setup()`` makes every notebook of the book run the same way on a Colab TPU, a multi-chip TPU, a GPU
or a laptop. The book's checked content (every printed figure a sentence quotes, every ``claim``) runs
on its reference devices, 8 simulated CPU devices, on any runtime: XLA:CPU's programs are what the
chapters describe. Those must be asked for before JAX starts its first backend. Where the runtime also
has 8 or more accelerators (a TPU v5e-8 on Kaggle, a TPU VM, a GPU machine), JAX starts them too, beside
the CPU devices (which stay the default): ``shardbook.your_chips()`` returns them and
``shardbook.on_your_chips(build)`` runs a chapter's step on them, printed as *measured on your chips*,
never asserted (:mod:`shardbook.chips`). ``SHARDBOOK_DEVICES=accelerator`` makes the accelerators the
default devices instead (the examples then run on them; a claim that does not hold there is printed,
not raised).

On Colab it first installs the JAX the book is tested with (the setup cell has installed this package
alone, without its dependencies, so that this happens here, with a progress line and pip's output out
of sight unless pip fails). A running Python cannot swap a module it has already imported, so when the
session holds NumPy, JAX or another of their packages at a version other than the one now installed,
``setup()`` stops with one sentence asking for a restart, and blocks ``import jax`` until then.

This module imports only the standard library: it runs before anything else is installed, and on any
Python, so that an old one gets a sentence rather than pip's list of JAX releases.
"""

from __future__ import annotations

import glob
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from .runtime import COMPANIONS, COMPANIONS_PIP, in_colab  # noqa: F401 (read here as shardbook.setup.*)

#: The JAX release every notebook of the book is executed with in CI.
PINNED_JAX = "0.12.0.1"
#: The oldest JAX with the APIs the book uses (jax.shard_map, jax.typeof, jax.reshard, DotAlgorithmPreset);
#: pyproject.toml's ``jax>=`` says the same (a test keeps them equal).
MIN_JAX = "0.12.0"
#: The oldest Python the pinned JAX is released for.
MIN_PYTHON = (3, 12)
#: Where the book's source lives; Colab installs the helper package from here.
REPOSITORY = "https://github.com/sharding-in-jax/sharding-in-jax"
#: The setup cell installs the helper from ``$SHARDBOOK_URL`` when it is set (a fork, a branch, a
#: local clone), else from ``git+REPOSITORY``.
INSTALL_URL_ENV = "SHARDBOOK_URL"
#: How many devices every example is written for.
NUM_DEVICES = 8
#: The helper's own requirements besides JAX (pyproject.toml's dependencies; a test keeps them equal).
REQUIREMENTS = ("numpy", "matplotlib", "packaging")
#: The book's one sentence on installing Flax, Optax and Orbax (Markdown), as every chapter that uses
#: them says it (a test holds the chapters to it).
COMPANIONS_ADVICE = (
    "On Colab the setup cell replaces the Flax, Optax and Orbax that Colab ships, built for its own JAX, "
    "with the versions this book is executed with; anywhere else, install those versions yourself: "
    f"`{COMPANIONS_PIP}`."
)
#: Modules a session may already hold at another version than the one installed: the packages JAX is
#: made of and the ones it imports. Import name -> distribution name.
WATCHED = {
    "numpy": "numpy",
    "jax": "jax",
    "jaxlib": "jaxlib",
    "scipy": "scipy",
    "ml_dtypes": "ml_dtypes",
    "opt_einsum": "opt_einsum",
    "libtpu": "libtpu",
    "matplotlib": "matplotlib",
    "packaging": "packaging",
    "flax": "flax",
    "optax": "optax",
}
#: What a learner must do in Colab after a package they already imported was replaced.
RESTART_COLAB = "Runtime → Restart session, then run this cell again"
#: The same outside Colab (Jupyter, VS Code, a script).
RESTART_ELSEWHERE = "restart the Python kernel, then run this cell again"
#: The extra of ``jax`` that brings each accelerator's runtime (libtpu, the CUDA plugin).
JAX_EXTRA = {"tpu": "tpu", "gpu": "cuda12"}
#: PCI device ids of TPU chips -> the chip's generation, from JAX's own table (``_TPU_PCI_DEVICE_IDS``
#: in jax/_src/hardware_utils.py of JAX 0.12.0.1; 0x0027 is TPU v2 or v3, one id for both, and 0x0056
#: has no public name).
TPU_PCI_IDS = {
    "0x0027": "v3",
    "0x0056": "plc",
    "0x005e": "v4",
    "0x0062": "v5p",
    "0x0063": "v5e",
    "0x006f": "v6e",
    "0x0076": "7x",
    "0x0083": "8i",
    "0x007c": "8t",
}
#: TensorCores per chip of each generation, from JAX's ``ChipVersion.num_physical_tensor_cores_per_chip``
#: (jax/_src/tpu_info.py of JAX 0.12.0.1; "plc", absent there, counted as one).
TENSOR_CORES_PER_CHIP = {
    "v2": 2,
    "v3": 2,
    "plc": 1,
    "v4": 2,
    "v5p": 2,
    "v5e": 1,
    "v6e": 1,
    "7x": 2,
    "8i": 2,
    "8t": 1,
}
#: Generations whose two TensorCores JAX joins into one "megacore" device (``supports_megacore`` in
#: jax/_src/tpu_info.py): on every other chip each TensorCore is a JAX device of its own.
MEGACORE = frozenset({"v4", "v5p"})
#: Generation prefixes of ``$TPU_ACCELERATOR_TYPE`` ("v3-8", "v5litepod-4", "tpu7x-8") -> generation.
ACCELERATOR_TYPE_GENERATIONS = {"v5litepod": "v5e", "tpu7x": "7x", "tpu8i": "8i", "tpu8t": "8t"}


def devices_per_chip(generation: str) -> int:
    """How many JAX devices one TPU chip of a generation ("v5e", "7x") is; 1 for an unknown one.

    Example:
      >>> devices_per_chip("v3"), devices_per_chip("v4"), devices_per_chip("7x")
      (2, 1, 2)
    """
    return 1 if generation in MEGACORE else TENSOR_CORES_PER_CHIP.get(generation, 1)


GOOGLE_PCI_VENDOR = "0x1ae0"


class SetupError(RuntimeError):
    """Raised when the devices cannot be set up; the message says what to do.

    In a notebook it shows as one line, ``SetupError: <what to do>``, without a traceback.
    """

    def _render_traceback_(self) -> list[str]:  # IPython's hook for an exception's own display
        return [f"SetupError: {self}"]


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


def restart_advice() -> str:
    """How to restart, in the words of the notebook front end in use."""
    return RESTART_COLAB if in_colab() else RESTART_ELSEWHERE


# --- what hardware is there ------------------------------------------------------------------------


def count_tpu(root: str = "/") -> tuple[int, int]:
    """Counts TPU chips without starting JAX, and the JAX devices they make.

    Reads the PCI devices under ``root``/sys (as JAX does), else counts ``/dev/accel*`` or
    ``/dev/vfio/<n>`` files (one per chip) and reads ``$TPU_ACCELERATOR_TYPE`` for the generation.

    Returns:
      ``(chips, devices)``; a TPU v3-8 has 4 chips and 8 devices, a v5e-1 one of each, a TPU7x chip
      two devices (see :func:`devices_per_chip`).
    """
    chips = devices = 0
    for vendor in glob.glob(os.path.join(root, "sys/bus/pci/devices/*/vendor")):
        folder = os.path.dirname(vendor)
        if not folder.endswith(".0"):
            continue
        try:
            with open(vendor) as f:
                if f.read().strip() != GOOGLE_PCI_VENDOR:
                    continue
            with open(os.path.join(folder, "device")) as f:
                device_id = f.read().strip()
        except OSError:
            continue
        if device_id in TPU_PCI_IDS:
            chips += 1
            devices += devices_per_chip(TPU_PCI_IDS[device_id])
    if chips:
        return chips, devices
    files = glob.glob(os.path.join(root, "dev/accel[0-9]*")) or [
        p for p in glob.glob(os.path.join(root, "dev/vfio/*")) if re.fullmatch(r".*/\d+", p)
    ]
    generation = os.environ.get("TPU_ACCELERATOR_TYPE", "").split("-")[0]
    per_chip = devices_per_chip(ACCELERATOR_TYPE_GENERATIONS.get(generation, generation))
    return len(files), len(files) * per_chip


def count_accelerators(root: str = "/") -> tuple[str, int]:
    """Counts the JAX devices of this machine's TPUs or NVIDIA GPUs without starting JAX.

    Returns:
      ``(kind, count)`` with kind ``'tpu'``, ``'gpu'`` or ``'cpu'`` (count 0 for ``'cpu'``). For TPUs
      the count is of devices, not chips: a TPU v2-8 or v3-8 has 8 devices on 4 chips.
    """
    _, tpu_devices = count_tpu(root)
    if tpu_devices:
        return "tpu", tpu_devices
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


@dataclass(frozen=True)
class DevicePlan:
    """What :func:`setup` starts: ``jax_platforms`` (the first is the default backend) and whether the
    default devices are the book's reference, 8 simulated CPU devices.

    ``chips`` is the accelerator platform started beside the reference ("tpu", "gpu"), or None.
    """

    platforms: str
    reference: bool
    chips: str | None


def plan_devices(kind: str, count: int, devices: str = "auto") -> DevicePlan:
    """Decides which devices the book runs on, from the accelerators found (:func:`count_accelerators`).

    Args:
      kind: ``'tpu'``, ``'gpu'`` or ``'cpu'``.
      count: how many devices of that kind there are.
      devices: ``'auto'`` (the reference CPU devices, and 8 or more accelerators started beside them),
        ``'cpu'`` (the reference devices alone) or ``'accelerator'`` (the accelerators as the default
        devices, whatever their number: the checked content no longer runs on the reference).

    Raises:
      ValueError: for any other value of ``devices``.

    Example:
      >>> plan_devices("tpu", 8)
      DevicePlan(platforms='cpu,tpu', reference=True, chips='tpu')
      >>> plan_devices("tpu", 1)  # Colab's one chip: the reference devices alone
      DevicePlan(platforms='cpu', reference=True, chips=None)
    """
    if devices not in ("auto", "cpu", "accelerator"):
        raise ValueError(f"devices must be 'auto', 'cpu' or 'accelerator', got {devices!r}")
    if kind == "cpu" or count == 0 or devices == "cpu":
        return DevicePlan("cpu", True, None)
    if devices == "accelerator":
        return DevicePlan(kind, False, None)
    if count >= NUM_DEVICES:
        return DevicePlan(f"cpu,{kind}", True, kind)
    return DevicePlan("cpu", True, None)


def choose_devices(kind: str, count: int, devices: str = "auto") -> bool:
    """Whether the book's default devices are the 8 simulated CPU devices (see :func:`plan_devices`)."""
    return plan_devices(kind, count, devices).reference


#: What the last :func:`setup` chose; None before it ran (tests, grading: the reference devices).
_PLAN: DevicePlan | None = None


def on_reference_devices() -> bool:
    """Whether the default devices are the book's reference (8 simulated CPU devices): True unless
    :func:`setup` made an accelerator the default (``devices='accelerator'``)."""
    return _PLAN is None or _PLAN.reference


def chips_platform() -> str | None:
    """The accelerator platform :func:`setup` started beside the reference devices ("tpu", "gpu"), or None."""
    return None if _PLAN is None else _PLAN.chips


# --- what is installed, what is loaded -------------------------------------------------------------


def installed_version(distribution: str) -> str | None:
    """The version of an installed distribution, from its metadata on disk; None if not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def loaded_version(module: str) -> str | None:
    """The version of a module this session has already imported; None if not imported or unknown."""
    loaded = sys.modules.get(module)
    value = getattr(loaded, "__version__", None)
    return value if isinstance(value, str) else None


def _same(a: str, b: str) -> bool:
    return a.split("+")[0].lower() == b.split("+")[0].lower()


def stale_modules() -> list[tuple[str, str, str]]:
    """(module, loaded version, installed version) for each watched module loaded at another version."""
    stale = []
    for module, distribution in WATCHED.items():
        loaded = loaded_version(module)
        installed = installed_version(distribution) if loaded else None
        if loaded and installed and not _same(loaded, installed):
            stale.append((module, loaded, installed))
    return stale


def _satisfied(requirement: str) -> bool:
    """Whether an installed distribution meets a requirement such as ``libtpu==0.0.50.*``."""
    match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*([^;]*)", requirement)
    if match is None:
        return False
    name, spec = match.group(1), match.group(2).strip()
    have = installed_version(name)
    if have is None:
        return False
    if not spec:
        return True
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:
        return False
    return SpecifierSet(spec).contains(have, prereleases=True)


def _extra_requirements(extra: str) -> list[str]:
    """The requirements the installed jax adds for an extra, e.g. libtpu's pin for ``tpu``."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        lines = requires("jax") or []
    except PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [line.split(";")[0] for line in lines if marker.search(line.split(";", 1)[-1]) and ";" in line]


def missing_requirements(kind: str, colab: bool) -> list[str]:
    """What pip must install before the book can run: ``[]`` when nothing.

    Anywhere, JAX and the helper's requirements must be installed. On Colab, whose runtime comes with
    its own JAX, the pinned JAX and jaxlib must be the ones installed, on a TPU or GPU runtime also
    the accelerator runtime that JAX release asks for (libtpu, the CUDA plugin), and Colab's own
    flax, optax and orbax-checkpoint are replaced by the versions the book is executed with
    (:data:`COMPANIONS`); the setup cell never installs them where they are missing.
    """
    extra = JAX_EXTRA.get(kind)
    jax = f"jax[{extra}]=={PINNED_JAX}" if extra else f"jax=={PINNED_JAX}"
    wanted = [jax, f"jaxlib=={PINNED_JAX}", *REQUIREMENTS]
    if any(installed_version(name) is None for name in ("jax", "jaxlib", *REQUIREMENTS)):
        return wanted
    if not colab:
        return []
    # Colab's flax, optax and orbax are built for its own JAX: replaced together with it.
    stale = [
        f"{name}=={version}"
        for name, version in COMPANIONS.items()
        if installed_version(name) not in (None, version)
    ]
    if installed_version("jax") != PINNED_JAX or installed_version("jaxlib") != PINNED_JAX:
        return wanted + stale
    if extra and not all(_satisfied(r) for r in _extra_requirements(extra)):
        return wanted + stale
    return wanted + stale if stale else []


def pip_install(requirements: list[str], *, tick_seconds: float = 10.0, pip: list[str] | None = None) -> None:
    """Installs with pip, showing one progress line and keeping pip's output unless it fails.

    pip's resolver warnings about packages of the runtime that pin other versions (Colab has some)
    stay out of sight: they do not stop the book.

    Raises:
      SetupError: pip failed; the end of its output is printed above the message.
    """
    names = ", ".join(requirements[:2]) + (" and what they need" if len(requirements) > 2 else "")
    print(f"shardbook: pip is installing {names}…", end="", flush=True)
    start = time.monotonic()
    # --no-compile: bytecode only for the modules a session imports, written as it first imports them
    # (the whole JAX stack compiled by pip: about 10 s of CPU more, 2 s of it ever imported)
    cmd = [*(pip or [sys.executable, "-m", "pip"]), "install", "--progress-bar", "off", "--no-compile"]
    cmd += requirements
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        shown = 0.0
        while process.poll() is None:
            time.sleep(0.2)
            elapsed = time.monotonic() - start
            if elapsed >= shown + tick_seconds:
                shown += tick_seconds
                print(f" {shown:g} s", end="", flush=True)
        log.seek(0)
        output = log.read()
    seconds = time.monotonic() - start
    if process.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        print(f" failed after {seconds:.0f} s. The end of pip's output:\n{tail}", flush=True)
        raise SetupError(
            "pip could not install what the book needs (its last lines are above); check that this "
            "runtime is connected to the internet and run this cell again."
        )
    print(f" done in {seconds:.0f} s.", flush=True)
    importlib.invalidate_caches()


# --- a session that must restart -------------------------------------------------------------------


class _RestartFirst:
    """An import hook for a session that must restart: importing JAX or the book's tools says so in
    one line, instead of failing deep inside a NumPy that changed under it."""

    def __init__(self, message: str):
        self.message = message

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in ("jax", "jaxlib") or (top == "shardbook" and name not in ("shardbook", __name__)):
            raise SetupError(self.message)
        return None


def _block_imports_until_restart(message: str) -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _RestartFirst)]
    sys.meta_path.insert(0, _RestartFirst(message))


def _restart_message(stale: list[tuple[str, str, str]]) -> str:
    names = {"numpy": "NumPy", "jax": "JAX", "scipy": "SciPy", "matplotlib": "Matplotlib"}

    def listing(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    one = len(stale) == 1
    return (
        f"{listing([f'{names.get(m, m)} {old}' for m, old, _ in stale])} "
        f"{'is' if one else 'are'} loaded in this session but {listing([new for _, _, new in stale])} "
        f"{'is' if one else 'are'} now installed, and a running Python cannot swap "
        f"{'it' if one else 'them'}: {restart_advice()}."
    )


# --- the call at the top of every notebook ---------------------------------------------------------


def check_python(version: tuple[int, ...] | None = None) -> None:
    """Refuses a Python older than the pinned JAX supports, in one sentence."""
    version = tuple(version or sys.version_info[:3])
    if version[:2] < MIN_PYTHON:
        have = ".".join(map(str, version[:3]))
        raise SetupError(
            f"this book needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer (JAX {PINNED_JAX} is released "
            f"for no older one) and this runtime has Python {have}: on Colab choose the latest runtime "
            f"version under Runtime → Change runtime type; elsewhere start Jupyter from a newer Python."
        )


def _one_chip_note(kind: str, count: int) -> str:
    what = {"tpu": "TPU device", "gpu": "GPU"}.get(kind, f"{kind} device")
    chips = count_tpu()[0] if kind == "tpu" else 0
    have = f"{count} {what}{'s' if count != 1 else ''}"
    if chips:
        have = f"{chips} TPU chip{'s' if chips != 1 else ''} ({count} JAX device{'s' if count != 1 else ''})"
    return (
        f"shardbook: this runtime has {have} and every example is written for {NUM_DEVICES} devices, so "
        f"the book runs on {NUM_DEVICES} simulated CPU devices: the same shardings and collectives, at CPU "
        "speed (Appendix B, What the simulator changes, lists how XLA:CPU's programs differ). No chapter "
        "runs on the accelerator itself: TPU timings come from the cost model (Chapter 5 and Appendix A, "
        "Reading the compiled program), GPU ones in Chapter 9 from a recorded run. To compute on it anyway, "
        "run %env SHARDBOOK_DEVICES=accelerator before this cell in a new session; examples written for "
        "8 devices then fail."
    )


def _your_chips_note(platform: str, count: int) -> str:
    what = {"tpu": "TPU devices", "gpu": "GPUs"}.get(platform, f"{platform} devices")
    return (
        f"shardbook: this runtime also has {count} {what}. Every example and check runs on the book's "
        f"{NUM_DEVICES} simulated CPU devices, whose compiled programs the chapters describe; where a "
        "chapter offers it, the same step also runs on your chips (shardbook.on_your_chips), printed as "
        "measured on your chips and never checked against the text."
    )


def _started_chips(jax) -> str | None:
    """The accelerator platform a JAX that already started has beside its CPU devices, or None."""
    for platform in ("tpu", "gpu"):
        try:
            if len(jax.devices(platform)) >= NUM_DEVICES:
                return platform
        except RuntimeError:
            continue
    return None


def setup(devices: str | None = None, *, quiet: bool = False) -> DeviceSummary:
    """Prepares JAX for the book and prints one line saying which devices it uses.

    Call it once, at the top of a notebook, before any other JAX call. On Colab (or wherever JAX or
    the helper's requirements are missing) it first installs them with pip.

    Args:
      devices: ``'auto'`` (default; also read from the ``SHARDBOOK_DEVICES`` environment variable):
        the 8 simulated CPU devices, with 8 or more accelerators started beside them
        (:func:`plan_devices`); ``'cpu'``: the simulated devices alone; ``'accelerator'``: whatever
        accelerators exist as the default devices, even if there are fewer than 8.
      quiet: do not print the summary line.

    Returns:
      A :class:`DeviceSummary`.

    Raises:
      SetupError: Python or JAX is too old, pip failed, the session holds packages older than the ones
        installed (restart), or JAX already started with fewer than 8 devices.

    Example:
      >>> import shardbook
      >>> summary = shardbook.setup()  # doctest: +ELLIPSIS
      shardbook: 8 simulated CPU devices · backend cpu · JAX ...
      >>> summary.count, summary.simulated
      (8, True)
    """
    check_python()
    devices = devices or os.environ.get("SHARDBOOK_DEVICES", "auto")
    kind, count = count_accelerators()

    wanted = missing_requirements(kind, in_colab())
    if wanted:
        pip_install(wanted)
    stale = stale_modules()
    if stale:
        message = _restart_message(stale)
        _block_imports_until_restart(message)
        raise SetupError(message)

    import jax

    if _version_tuple(jax.__version__) < _version_tuple(MIN_JAX):
        raise SetupError(
            f"this book needs JAX {MIN_JAX} or newer and found {jax.__version__}: "
            f'run  pip install -U "jax=={PINNED_JAX}"  and after that, {restart_advice()}.'
        )

    global _PLAN
    plan = plan_devices(kind, count, devices)
    if _backends_started():
        found = _enough_started_devices(jax.devices())
        plan = DevicePlan(found[0].platform, found[0].platform == "cpu", _started_chips(jax))
    else:
        if plan.reference:
            try:
                jax.config.update("jax_num_cpu_devices", NUM_DEVICES)
            except RuntimeError:  # refused once a backend has started (when _backends_started cannot tell)
                found = _enough_started_devices(jax.devices())
                plan = DevicePlan(found[0].platform, found[0].platform == "cpu", _started_chips(jax))
            else:
                jax.config.update("jax_platforms", plan.platforms)
        found = jax.devices()
    _PLAN = plan
    summary = DeviceSummary(
        backend=found[0].platform,
        count=len(found),
        simulated=found[0].platform == "cpu",
        jax_version=jax.__version__,
    )
    if not quiet:
        print(summary)
        if plan.chips:
            print(_your_chips_note(plan.chips, count))
        elif summary.simulated and kind != "cpu" and devices == "auto":
            print(_one_chip_note(kind, count))
    _explain_errors_in_notebook()
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is not None:  # where a page is drawn: a notebook
        _short_source_paths()
        from .viz.phone import PHONE_FIGURES_ENV, show_figures_for_phones

        # Only where the book's pages are made (tools/notebooks.py run, make book): Colab and grading
        # show the one figure, and drawing a second would only cost them time.
        if hasattr(shell, "display_formatter") and os.environ.get(PHONE_FIGURES_ENV):
            show_figures_for_phones(shell)  # every figure also drawn for a phone's column
    return summary


def short_source_path(filepath: str) -> str:
    """The part of a source file's path that reads the same on every machine: from the package on.

    Example:
      >>> short_source_path("/home/me/.venv/lib/python3.12/site-packages/flax/nnx/nn/dtypes.py")
      'flax/nnx/nn/dtypes.py'
      >>> short_source_path("/tmp/ipykernel_41/2870.py")
      '2870.py'
    """
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in filepath:
            return filepath.rsplit(marker, 1)[1]
    return filepath.rsplit("/", 1)[-1]


def _short_source_paths() -> None:
    """treescope, which draws ``nnx.display``'s tree, notes where each function was defined with the
    full path of this machine's Python installation; a page built here would show it to every reader.
    The path from the package on says the same and nothing about the machine."""
    try:
        from treescope._internal.handlers import (  # type: ignore[import-untyped]
            function_reflection_handlers as handlers,
        )
    except ImportError:  # no treescope (or another layout of it): nothing shows a path
        return
    original = getattr(handlers, "format_source_location", None)
    if original is None or getattr(original, "shardbook_short", False):
        return

    def format_source_location(filepath: str, lineno: int):
        return original(short_source_path(filepath), lineno)

    format_source_location.shardbook_short = True  # type: ignore[attr-defined]
    handlers.format_source_location = format_source_location


def _explain_errors_in_notebook() -> None:
    """In a notebook, common JAX mistakes are shown in words (shardbook.errors.explain_common_errors)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        from .errors import explain_common_errors

        explain_common_errors(shell)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:4])


def _enough_started_devices(found: list) -> list:
    """``found`` when JAX, already started, has enough devices; else SetupError with what to do."""
    if len(found) < NUM_DEVICES:
        raise SetupError(
            f"JAX already started with {len(found)} {found[0].platform} device(s) before this cell "
            f"ran, and the number of simulated devices can only be chosen before that: "
            f"{restart_advice()}, before any other cell."
        )
    return found


#: JAX's private answer to "has a backend started?" (module, function); see _backends_started.
PRIVATE_BACKEND_QUERY = ("jax._src.xla_bridge", "backends_are_initialized")


def _backends_started() -> bool | None:
    """Whether JAX has already started a backend (the device count is fixed from then on); None when
    this JAX cannot say.

    JAX 0.12 has no public question for this: the answer is ``backends_are_initialized`` in the private
    module ``jax._src.xla_bridge``. If a later JAX moves or renames it, this returns None and
    :func:`setup` relies on JAX's public refusal instead: ``jax.config.update("jax_num_cpu_devices", n)``
    raises RuntimeError once a backend has started, which becomes the same SetupError.
    """
    module, name = PRIVATE_BACKEND_QUERY
    try:
        return bool(getattr(importlib.import_module(module), name)())
    except (ImportError, AttributeError):
        return None
