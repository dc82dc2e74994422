"""shardbook.setup: device choice, the summary line, and clear errors."""

import fnmatch
import importlib
import os
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import jax
import nbformat
import numpy as np
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
    ("kind", "count", "devices", "platforms", "reference", "chips"),
    [
        ("cpu", 0, "auto", "cpu", True, None),
        ("gpu", 1, "auto", "cpu", True, None),  # one GPU: simulate 8 CPU devices
        ("tpu", 1, "auto", "cpu", True, None),  # Colab's free single-chip TPU
        # a v5e-8 (Kaggle): the reference devices stay the default, the chips are started beside them
        ("tpu", 8, "auto", "cpu,tpu", True, "tpu"),
        ("gpu", 8, "auto", "cpu,gpu", True, "gpu"),
        ("gpu", 2, "accelerator", "gpu", False, None),
        ("tpu", 8, "accelerator", "tpu", False, None),
        ("tpu", 8, "cpu", "cpu", True, None),
    ],
)
def test_plan_devices(kind, count, devices, platforms, reference, chips):
    # Property: on any runtime the default devices are the 8 simulated CPU devices (what the chapters'
    # checks are written for) unless the learner asks for the accelerators; 8 or more accelerators are
    # started beside them, never in their place.
    plan = devices_setup.plan_devices(kind, count, devices)
    assert (plan.platforms, plan.reference, plan.chips) == (platforms, reference, chips)
    assert devices_setup.choose_devices(kind, count, devices) is reference
    assert plan.platforms.split(",")[0] == ("cpu" if reference else kind)  # the first is JAX's default


def test_choose_devices_rejects_unknown_choice():
    with pytest.raises(ValueError, match="'auto', 'cpu' or 'accelerator', got 'gpu'"):
        devices_setup.choose_devices("cpu", 0, "gpu")


def _run(code: str, **env_vars) -> subprocess.CompletedProcess:
    env = dict(os.environ, SHARDBOOK_DEVICES="auto", PYTHONPATH=str(ROOT))
    env.pop("COLAB_RELEASE_TAG", None)
    env.update({k: v for k, v in env_vars.items() if v is not None})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("colab", [False, True])
def test_setup_after_jax_started_with_too_few_devices_says_what_to_do(colab):
    # A learner who used JAX before the setup cell gets one sentence, not a traceback from JAX, with
    # the restart in the words of their front end.
    result = _run(
        "import jax, jax.numpy as jnp; jnp.zeros(1)\n"
        "import shardbook\n"
        "try:\n    shardbook.setup()\nexcept shardbook.SetupError as e:\n    print('MESSAGE', e)\n",
        COLAB_RELEASE_TAG="test" if colab else None,
    )
    assert "MESSAGE JAX already started with 1 cpu device(s)" in result.stdout, result.stderr
    advice = devices_setup.RESTART_COLAB if colab else devices_setup.RESTART_ELSEWHERE
    assert f"{advice}, before any other cell." in result.stdout
    assert "pip is installing" not in result.stdout  # the pinned JAX is there: nothing to install


# as if a later JAX had renamed the private function (deleting JAX's own would break JAX itself)
HIDE_PRIVATE_BACKEND_QUERY = (
    "import sys, shardbook; s = sys.modules['shardbook.setup']\n"
    "s.PRIVATE_BACKEND_QUERY = ('jax._src.xla_bridge', 'renamed')\n"
    "assert s._backends_started() is None\n"
)


@pytest.mark.parametrize("started", [False, True])
def test_setup_without_jax_private_backend_query(started):
    # setup() asks the private jax._src.xla_bridge.backends_are_initialized whether JAX has started; a
    # JAX without it gets the same outcome through the public config's refusal, not a traceback.
    result = _run(
        HIDE_PRIVATE_BACKEND_QUERY
        + ("import jax.numpy as jnp; jnp.zeros(1)\n" if started else "")
        + "import shardbook\n"
        "try:\n    print('DEVICES', shardbook.setup(quiet=True).count)\n"
        "except shardbook.SetupError as e:\n    print('MESSAGE', e)\n"
    )
    if started:
        assert "MESSAGE JAX already started with 1 cpu device(s)" in result.stdout, result.stderr
    else:
        assert "DEVICES 8" in result.stdout, result.stderr


def test_too_old_jax_is_refused_in_one_sentence(monkeypatch):
    # Outside Colab an old JAX that is both installed and loaded is the learner's to upgrade.
    monkeypatch.setattr(jax, "__version__", "0.4.30")
    real = devices_setup.installed_version
    monkeypatch.setattr(devices_setup, "installed_version", lambda d: "0.4.30" if d == "jax" else real(d))
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    with pytest.raises(shardbook.SetupError) as error:
        shardbook.setup(quiet=True)
    assert str(error.value) == (
        'this book needs JAX 0.12.0 or newer and found 0.4.30: run  pip install -U "jax==0.12.0.1"  '
        "and after that, restart the Python kernel, then run this cell again."
    )


def test_summary_is_not_displayed_twice():
    # The setup cell ends with shardbook.setup(): Jupyter must not print the summary a second time.
    summary = shardbook.setup(quiet=True)
    assert summary._ipython_display_() is None


def test_repository_url_is_configured_once():
    # The Colab buttons (_config.yml), the helper's install URL and every setup cell agree. Links to
    # other projects (a cited JAX source file) are not the book's own and may point anywhere.
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == shardbook.REPOSITORY
    own = shardbook.REPOSITORY.rsplit("/", 1)[1]
    for path in list((ROOT / "book").glob("*.ipynb")) + list((ROOT / "exercises").glob("*/*.ipynb")):
        text = path.read_text()
        urls = (
            set(re.findall(r"git\+(https://github\.com/[\w-]+/[\w-]+)", text))
            | set(re.findall(r"https://github\.com/[\w-]+/" + re.escape(own) + r"\b", text))
            | set(re.findall(r"colab\.research\.google\.com/github/([\w-]+/[\w-]+)", text))
        )
        assert urls, path.name  # every notebook names the book's repository (its setup cell does)
        for url in urls:
            assert shardbook.REPOSITORY.endswith(url.removeprefix("https://github.com/")), (path.name, url)


def test_pinned_jax_matches_requirements():
    requirements = (ROOT / "requirements.txt").read_text()
    assert f"jax=={shardbook.PINNED_JAX}" in requirements


def test_colab_companions_match_requirements():
    pins = dict(
        line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line
    )
    assert devices_setup.COMPANIONS == {name: pins[name] for name in devices_setup.COMPANIONS}


# --- what the setup cell says on Colab: install, restart, old Python, one chip ----------------------

SETUP_CELL = next(
    c.source
    for c in nbformat.read(ROOT / "exercises" / "01_meshes" / "01_meshes.ipynb", as_version=4).cells
    if c.cell_type == "code"
)


def test_setup_cell_names_the_pinned_jax_and_the_repository():
    assert f"installing JAX {shardbook.PINNED_JAX} and the book's helper, about a minute…" in SETUP_CELL
    flat = " ".join(SETUP_CELL.split())  # the cell as laid out at 88 columns, on one line
    assert f'os.environ.get( "{devices_setup.INSTALL_URL_ENV}", "git+{shardbook.REPOSITORY}" )' in flat
    # The cell installs the helper alone; JAX comes through setup(), where its output is kept quiet.
    assert '"--no-deps"' in SETUP_CELL and "shardbook.setup()" in SETUP_CELL


def test_requirements_match_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.findall(
        r'^\s*"([A-Za-z0-9_.-]+)[^"]*",$', text.split("dependencies = [")[1].split("]")[0], re.M
    )
    assert sorted(deps) == sorted(["jax", *devices_setup.REQUIREMENTS])


def test_minimum_jax_matches_pyproject():
    # one fact, two places: setup() refuses an older JAX than pip would accept for the helper package
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (jax_requirement,) = [d for d in dependencies if re.match(r"jax\b", d)]
    assert jax_requirement == f"jax>={devices_setup.MIN_JAX}"


def test_importing_shardbook_loads_nothing_heavy():
    # The setup cell imports shardbook before JAX exists at the right version: nothing may load yet.
    result = _run(
        "import sys, shardbook\n"
        "print(sorted(m for m in ('numpy', 'jax', 'jaxlib', 'scipy', 'packaging', 'matplotlib', 'rich')"
        " if m in sys.modules))"
    )
    assert result.stdout.strip() == "[]", result.stderr


REAL_INSTALLED = devices_setup.installed_version


class Installed:
    """A fake of importlib.metadata: distribution -> version (None: not installed); others are real."""

    def __init__(self, **versions):
        self.versions = {k.replace("_", "-"): v for k, v in versions.items()}

    def __call__(self, distribution):
        key = distribution.replace("_", "-")
        return self.versions[key] if key in self.versions else REAL_INSTALLED(distribution)


COLAB_STACK = dict(jax="0.9.2", jaxlib="0.9.2", numpy="2.0.2", flax=None, optax=None, orbax_checkpoint=None)
BOOK_STACK = dict(
    jax="0.12.0.1", jaxlib="0.12.0.1", numpy="2.5.5", flax=None, optax=None, orbax_checkpoint=None
)


@pytest.mark.parametrize(
    ("stack", "kind", "colab", "extra_ok", "wanted"),
    [
        (COLAB_STACK, "cpu", True, True, ["jax==0.12.0.1", "jaxlib==0.12.0.1"]),
        (COLAB_STACK, "tpu", True, True, ["jax[tpu]==0.12.0.1", "jaxlib==0.12.0.1"]),
        (COLAB_STACK, "gpu", True, True, ["jax[cuda12]==0.12.0.1", "jaxlib==0.12.0.1"]),
        (BOOK_STACK, "cpu", True, True, []),
        (BOOK_STACK, "tpu", True, True, []),
        (BOOK_STACK, "tpu", True, False, ["jax[tpu]==0.12.0.1", "jaxlib==0.12.0.1"]),  # libtpu left old
        (COLAB_STACK, "cpu", False, True, []),  # a learner's own Python: told, not upgraded
        (dict(BOOK_STACK, matplotlib=None), "cpu", False, True, ["jax==0.12.0.1", "jaxlib==0.12.0.1"]),
    ],
)
def test_what_gets_installed(monkeypatch, stack, kind, colab, extra_ok, wanted):
    monkeypatch.setattr(devices_setup, "installed_version", Installed(**stack))
    monkeypatch.setattr(devices_setup, "_extra_requirements", lambda extra: ["libtpu==0.0.50.*"])
    monkeypatch.setattr(devices_setup, "_satisfied", lambda requirement: extra_ok)
    got = devices_setup.missing_requirements(kind, colab)
    assert got == ([*wanted, *devices_setup.REQUIREMENTS] if wanted else [])


@pytest.mark.parametrize(
    ("stack", "colab", "wanted"),
    [
        # Colab's own flax and optax, built for its JAX, are replaced with it; a missing one is not added
        (
            dict(COLAB_STACK, flax="0.10.4", optax="0.2.4"),
            True,
            [
                "jax==0.12.0.1",
                "jaxlib==0.12.0.1",
                *devices_setup.REQUIREMENTS,
                "flax==0.12.12",
                "optax==0.2.8",
            ],
        ),
        # after the restart: the pinned JAX and companions installed, nothing to do
        (dict(BOOK_STACK, flax="0.12.12", optax="0.2.8"), True, []),
        # the pinned JAX already there but an old optax: only the companion is replaced
        (
            dict(BOOK_STACK, optax="0.2.4"),
            True,
            ["jax==0.12.0.1", "jaxlib==0.12.0.1", *devices_setup.REQUIREMENTS, "optax==0.2.8"],
        ),
        # a learner's own Python: their flax is theirs
        (dict(BOOK_STACK, flax="0.10.4"), False, []),
    ],
)
def test_colab_companions_are_replaced_with_jax(monkeypatch, stack, colab, wanted):
    monkeypatch.setattr(devices_setup, "installed_version", Installed(**stack))
    assert devices_setup.missing_requirements("cpu", colab) == wanted


def test_extra_requirements_are_read_from_the_installed_jax():
    # The pins jax[tpu] asks for (libtpu) are JAX's own, so a new pin needs no change here.
    assert any(r.startswith("libtpu") for r in devices_setup._extra_requirements("tpu"))
    assert devices_setup._satisfied("jax==" + shardbook.PINNED_JAX)
    assert not devices_setup._satisfied("jax==0.9.2")
    assert not devices_setup._satisfied("no-such-distribution-here")


def _fake_pip(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_pip_noise_stays_hidden_when_the_install_works(capsys):
    noise = "ERROR: pip's dependency resolver does not currently take into account all the packages"
    pip = _fake_pip(f"import time; print({noise!r}); time.sleep(0.7)")
    devices_setup.pip_install(["jax==0.12.0.1"], tick_seconds=0.25, pip=pip)
    out = capsys.readouterr().out
    assert out.startswith("shardbook: pip is installing jax==0.12.0.1… 0.25 s 0.5 s")
    assert re.search(r" done in \d+ s\.\n$", out) and "resolver" not in out


def test_a_failed_install_shows_the_end_of_pips_output_and_one_sentence(capsys):
    pip = _fake_pip("import sys; print('\\n'.join(f'line {i}' for i in range(30))); sys.exit(1)")
    with pytest.raises(shardbook.SetupError, match=r"^pip could not install what the book needs"):
        devices_setup.pip_install(["jax==0.12.0.1", "jaxlib==0.12.0.1", "numpy"], pip=pip)
    out = capsys.readouterr().out
    assert "installing jax==0.12.0.1, jaxlib==0.12.0.1 and what they need…" in out
    assert "line 29" in out and "line 15" in out and "line 14" not in out  # the last 15 lines


@pytest.fixture
def colab(monkeypatch):
    """A Colab session: imports made after the test's restart message are unblocked afterwards."""
    monkeypatch.setenv("COLAB_RELEASE_TAG", "test")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(devices_setup, "count_accelerators", lambda: ("cpu", 0))
    return monkeypatch


def _install_on_colab(monkeypatch, stack):
    """pip, faked: installing moves the fake metadata to the book's stack."""
    installed = Installed(**stack)
    calls = []

    def pip_install(requirements):
        calls.append(requirements)
        installed.versions.update({k.replace("_", "-"): v for k, v in BOOK_STACK.items()})

    monkeypatch.setattr(devices_setup, "installed_version", installed)
    monkeypatch.setattr(devices_setup, "pip_install", pip_install)
    return calls


RESTART = "Runtime → Restart session, then run this cell again"


def test_fresh_colab_runtime_with_numpy_loaded_asks_for_a_restart_and_blocks_jax(colab):
    # Colab has NumPy 2.0.2 loaded before the first cell; the pinned JAX needs a newer one.
    import numpy

    calls = _install_on_colab(colab, dict(COLAB_STACK, numpy="2.0.2"))
    colab.setattr(numpy, "__version__", "2.0.2")
    with pytest.raises(shardbook.SetupError) as error:
        shardbook.setup()
    assert calls and calls[0][0] == "jax==0.12.0.1"
    assert str(error.value) == (
        "NumPy 2.0.2 is loaded in this session but 2.5.5 is now installed, and a running Python cannot "
        f"swap it: {RESTART}."
    )
    assert error.value._render_traceback_() == [f"SetupError: {error.value}"]  # one line in a notebook
    # Until the restart, JAX and the book's tools refuse to load with the same sentence, rather than
    # failing inside NumPy (`'numpy.ufunc' object has no attribute '__qualname__'`).
    for module in ("jax.experimental.never_imported_here", "shardbook.cost"):
        sys.modules.pop(module, None)
        with pytest.raises(shardbook.SetupError, match=re.escape(RESTART)):
            importlib.import_module(module)


def test_imports_cell_run_before_the_setup_cell_gets_the_restart_advice(colab):
    # The learner ran `import jax` first: Colab's JAX 0.9.2 is loaded, the pin is now installed.
    calls = _install_on_colab(colab, COLAB_STACK)
    colab.setattr(jax, "__version__", "0.9.2")
    with pytest.raises(shardbook.SetupError) as error:
        shardbook.setup()
    assert len(calls) == 1
    message = str(error.value)
    assert message.startswith("JAX 0.9.2 is loaded in this session but 0.12.0.1 is now installed")
    assert message.endswith(f"swap it: {RESTART}.") and "pip install" not in message


def test_after_the_restart_setup_installs_nothing_and_prints_one_line(colab, capsys):
    # The pin is installed and nothing stale is loaded, whatever ran first (here: JAX already in use).
    calls = _install_on_colab(colab, BOOK_STACK)
    colab.setattr(
        devices_setup,
        "installed_version",
        lambda d: {"numpy": np.__version__, **devices_setup.COMPANIONS}.get(d, jax.__version__),
    )
    colab.setattr(devices_setup, "WATCHED", {"numpy": "numpy", "jax": "jax"})
    summary = shardbook.setup()
    assert calls == [] and summary.count == 8
    assert capsys.readouterr().out.startswith("shardbook: 8 simulated CPU devices")


def test_a_session_module_at_another_version_is_found_in_sys_modules(monkeypatch):
    fake = types.ModuleType("fake_pkg_for_shardbook")
    fake.__version__ = "1.0"
    monkeypatch.setitem(sys.modules, "fake_pkg_for_shardbook", fake)
    monkeypatch.setattr(devices_setup, "WATCHED", {"fake_pkg_for_shardbook": "fake-pkg", "not_loaded": "x"})
    monkeypatch.setattr(devices_setup, "installed_version", Installed(**{"fake-pkg": "1.1", "x": "9"}))
    assert devices_setup.stale_modules() == [("fake_pkg_for_shardbook", "1.0", "1.1")]
    monkeypatch.setattr(devices_setup, "installed_version", Installed(**{"fake-pkg": "1.0+local"}))
    assert devices_setup.stale_modules() == []


def test_two_stale_packages_are_named_in_one_sentence(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    message = devices_setup._restart_message([("numpy", "2.0.2", "2.5.5"), ("jax", "0.9.2", "0.12.0.1")])
    assert message == (
        "NumPy 2.0.2 and JAX 0.9.2 are loaded in this session but 2.5.5 and 0.12.0.1 are now installed, "
        "and a running Python cannot swap them: restart the Python kernel, then run this cell again."
    )


def test_old_python_gets_one_sentence():
    with pytest.raises(shardbook.SetupError) as error:
        devices_setup.check_python((3, 11, 7))
    assert str(error.value).startswith(
        "this book needs Python 3.12 or newer (JAX 0.12.0.1 is released for no older one) and this "
        "runtime has Python 3.11.7:"
    )
    devices_setup.check_python((3, 12, 0))


def _older_python() -> str | None:
    for name in ("python3.11", "python3.10", "python3.9"):
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            path = os.path.join(folder, name)
            if os.access(path, os.X_OK):
                probe = subprocess.run([path, "-c", "print(1)"], capture_output=True, text=True)
                if probe.stdout.strip() == "1":
                    return path
    return None


@pytest.mark.skipif(_older_python() is None, reason="no Python older than 3.12 on PATH")
def test_old_python_for_real_imports_shardbook_and_says_one_sentence():
    # The setup cell installs the helper with --ignore-requires-python so that this sentence, not pip's
    # list of every JAX release, is what a learner on an old runtime reads.
    code = "import shardbook\ntry:\n    shardbook.setup()\nexcept shardbook.SetupError as e:\n    print(e)\n"
    result = subprocess.run(
        [_older_python(), "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert result.stdout.startswith("this book needs Python 3.12 or newer"), result.stderr


def _fake_sysfs(root: Path, chips: int, device_id: str) -> Path:
    for k in range(chips):
        folder = root / "sys" / "bus" / "pci" / "devices" / f"0000:00:0{k + 4}.0"
        folder.mkdir(parents=True)
        (folder / "vendor").write_text("0x1ae0\n")
        (folder / "device").write_text(device_id + "\n")
    nic = root / "sys" / "bus" / "pci" / "devices" / "0000:00:03.0"  # a Google NIC is not a TPU
    nic.mkdir(parents=True)
    (nic / "vendor").write_text("0x1ae0\n")
    (nic / "device").write_text("0x0042\n")
    return root


@pytest.mark.parametrize(
    ("chips", "device_id", "devices", "started"),
    [
        (4, "0x0027", 8, "tpu"),  # TPU v2-8 / v3-8: 8 devices on 4 chips, enough for the book
        (1, "0x0063", 1, None),  # Colab's free v5e-1
        (4, "0x005e", 4, None),  # v4-8: 4 megacore devices
        (8, "0x0063", 8, "tpu"),  # v5e-8
    ],
)
def test_tpu_devices_are_counted_not_chips(tmp_path, chips, device_id, devices, started):
    root = str(_fake_sysfs(tmp_path, chips, device_id))
    assert devices_setup.count_tpu(root) == (chips, devices)
    kind, count = devices_setup.count_accelerators(root)
    assert (kind, count) == ("tpu", devices)
    assert devices_setup.plan_devices(kind, count).chips == started


# One row per chip kind of JAX's tables (JAX 0.12.0.1): the PCI id from _TPU_PCI_DEVICE_IDS in
# jax/_src/hardware_utils.py, TensorCores per chip from ChipVersion.num_physical_tensor_cores_per_chip
# in jax/_src/tpu_info.py; v4 and v5p join their two cores into one megacore device.
JAX_TPU_CHIPS = [
    ("0x0027", "v3", 2),  # TPU v2 and v3 (one id): each TensorCore a device
    ("0x0056", "plc", 1),  # no public name, not in tpu_info
    ("0x005e", "v4", 1),  # megacore
    ("0x0062", "v5p", 1),  # megacore
    ("0x0063", "v5e", 1),
    ("0x006f", "v6e", 1),
    ("0x0076", "7x", 2),
    ("0x0083", "8i", 2),
    ("0x007c", "8t", 1),
]


@pytest.mark.parametrize(("device_id", "generation", "per_chip"), JAX_TPU_CHIPS)
def test_each_tpu_chip_kind_counts_as_jax_counts_it(tmp_path, device_id, generation, per_chip):
    # 4 chips of each kind in JAX's table make 4 × (devices per chip) JAX devices.
    assert devices_setup.TPU_PCI_IDS[device_id] == generation
    assert devices_setup.devices_per_chip(generation) == per_chip
    assert devices_setup.count_tpu(str(_fake_sysfs(tmp_path, 4, device_id))) == (4, 4 * per_chip)


def test_tpu_tables_agree_with_the_installed_jax():
    # The same facts, read from the private tables of the JAX installed here (skipped if they moved).
    hardware_utils = pytest.importorskip("jax._src.hardware_utils")
    tpu_info = pytest.importorskip("jax._src.tpu_info")
    names = {"v3": "v3", "plc": "plc", "v4": "v4", "v5p": "v5p", "v5e": "v5e", "v6e": "v6e"}
    names |= {"tpu7x": "7x", "tpu8i": "8i", "tpu8t": "8t"}
    jax_ids = {pci: names[version.name] for pci, version in hardware_utils._TPU_PCI_DEVICE_IDS.items()}
    assert devices_setup.TPU_PCI_IDS == jax_ids
    for chip in tpu_info.ChipVersion:
        if chip.value in devices_setup.TENSOR_CORES_PER_CHIP:
            cores = chip.num_physical_tensor_cores_per_chip
            assert devices_setup.TENSOR_CORES_PER_CHIP[chip.value] == cores, chip
            assert (chip.value in devices_setup.MEGACORE) == chip.supports_megacore, chip
    assert {row[0] for row in JAX_TPU_CHIPS} == set(jax_ids)


def test_tpu_without_sysfs_reads_the_accelerator_type(tmp_path, monkeypatch):
    (tmp_path / "dev").mkdir()
    for k in range(4):
        (tmp_path / "dev" / f"accel{k}").write_text("")
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v3-8")
    assert devices_setup.count_tpu(str(tmp_path)) == (4, 8)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-4")
    assert devices_setup.count_tpu(str(tmp_path)) == (4, 4)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5p-8")  # megacore: one device per chip
    assert devices_setup.count_tpu(str(tmp_path)) == (4, 4)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "tpu7x-8")
    assert devices_setup.count_tpu(str(tmp_path)) == (4, 8)


def test_one_chip_tpu_says_why_it_simulates_and_where_the_chip_is_used(monkeypatch, capsys):
    monkeypatch.setattr(devices_setup, "count_accelerators", lambda: ("tpu", 1))
    monkeypatch.setattr(devices_setup, "count_tpu", lambda root="/": (1, 1))
    shardbook.setup("auto")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("shardbook: 8 simulated CPU devices")
    assert lines[1].startswith(
        "shardbook: this runtime has 1 TPU chip (1 JAX device) and every example is written for 8 devices, "
        "so the book runs on 8 simulated CPU devices"
    )
    assert "%env SHARDBOOK_DEVICES=accelerator" in lines[1] and "cost model" in lines[1]
    shardbook.setup("auto", quiet=True)
    assert capsys.readouterr().out == ""


def test_setup_error_is_one_line_in_ipython(ipython_shell):
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        ipython_shell.run_cell("import shardbook\nraise shardbook.SetupError('do this')")
    assert captured.stdout.strip() + captured.stderr.strip() == "SetupError: do this"


def test_contributing_shows_the_setup_cell_as_it_is():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    block = re.search(r"  ```python\n(  # Setup:.*?)\n  ```", text, re.S).group(1)
    assert "\n".join(line[2:] for line in block.splitlines()) == SETUP_CELL


def test_setup_cell_that_cannot_install_says_so_after_pips_own_message(tmp_path):
    # The cell as it is, in a Python where shardbook cannot be imported and the URL leads nowhere.
    code = (
        "import sys\n"
        "class NoShardbook:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'shardbook':\n"
        "            raise ModuleNotFoundError(\"No module named 'shardbook'\")\n"
        "sys.meta_path.insert(0, NoShardbook())\n"
        f"exec(compile({SETUP_CELL!r}, 'setup cell', 'exec'))\n"
    )
    result = _run(code, SHARDBOOK_URL=str(tmp_path / "no-such-clone"))
    assert result.stdout == f"installing JAX {shardbook.PINNED_JAX} and the book's helper, about a minute…\n"
    assert "ERROR" in result.stderr and "no-such-clone" in result.stderr  # pip's own message
    assert result.stderr.rstrip().endswith(
        "RuntimeError: pip could not install the book's helper (its message is above): rerun this cell"
    )
    assert "During handling" not in result.stderr


def test_one_gpu_is_counted_from_nvidia_smi(tmp_path, monkeypatch):
    # The line format is the one `nvidia-smi -L` printed on an H200 machine.
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-89084eaf-9ca4-abf7-f47f-d3e58d60bb18)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    kind, count = devices_setup.count_accelerators(str(tmp_path))  # no TPU under this root
    assert (kind, count) == ("gpu", 1) and devices_setup.choose_devices(kind, count)
    assert devices_setup._one_chip_note(kind, count).startswith("shardbook: this runtime has 1 GPU and every")


def test_every_subpackage_and_data_file_of_shardbook_is_installed():
    # pip installs what setuptools finds from pyproject.toml: a subpackage or data file left out breaks
    # Colab. setuptools' own reading of the file (as `pip install` does it, without building) is asked.
    from setuptools.config.pyprojecttoml import read_configuration

    config = read_configuration(ROOT / "pyproject.toml")["tool"]["setuptools"]
    source = ROOT / "shardbook"
    with_code = {".".join(p.parent.relative_to(ROOT).parts) for p in source.rglob("*.py")}
    assert with_code and with_code <= set(config["packages"])
    data = {
        p.relative_to(source).as_posix() for p in source.rglob("*") if p.suffix not in ("", ".py", ".pyc")
    }
    patterns = config["package-data"]["shardbook"]
    left_out = [path for path in data if not any(fnmatch.fnmatchcase(path, p) for p in patterns)]
    assert data and not left_out, left_out
