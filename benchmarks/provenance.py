"""Where a chip record was made, as every recorder writes it: the device, JAX, libtpu, Python, the
date and the command. JAX and the standard library only (the recorders run on a bare TPU image)."""

from __future__ import annotations

import datetime
import platform


def chip_provenance(command: str) -> dict:
    """The device JAX sees first, the versions and today's date, and ``command`` as it was run."""
    import jax

    device = jax.devices()[0]
    try:
        from importlib.metadata import version

        libtpu = version("libtpu")
    except Exception:  # a machine without libtpu (a CPU test)
        libtpu = "unknown"
    return {
        "device_kind": device.device_kind,
        "platform": device.platform,
        "devices": jax.device_count(),
        "hbm_bytes_limit": int((device.memory_stats() or {}).get("bytes_limit", 0)),
        "jax": jax.__version__,
        "libtpu": libtpu,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "command": command,
    }
