"""The Debian packages `make test` needs besides PyPI: installed when missing (as root), else named.

python tools/system_packages.py    exits 0 when every package's program is there (installing what is
                                    missing with apt-get when run as root), else 1 with the one command
                                    to run, in its first seconds rather than twenty minutes into the run

Standard library only: it runs before the virtual environment exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable

#: Debian package -> the programs any one of which provides it (what the project looks for).
PACKAGES = {
    "chromium": ("chromium", "chromium-browser", "google-chrome"),  # the site check's (tools/site_check.py)
    "bubblewrap": ("bwrap",),  # the grading sandbox (grading/sandbox.py)
    "poppler-utils": ("pdftotext",),  # reads the printed book back (tools/pdf.py)
}


def missing_packages(which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """The packages of :data:`PACKAGES` none of whose programs is found ($CHROMIUM counts, as for the
    site check)."""
    found = {p for programs in PACKAGES.values() for p in programs if which(p)}
    if os.environ.get("CHROMIUM") and which(os.environ["CHROMIUM"]):
        found.add("chromium")
    return [package for package, programs in PACKAGES.items() if not found & set(programs)]


def install_command(packages: list[str]) -> list[str]:
    """apt-get's command line that installs ``packages`` (no recommended extras, no questions)."""
    return ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]


def ensure(
    which: Callable[[str], str | None] = shutil.which,
    is_root: bool | None = None,
    run: Callable[[list[str]], int] = lambda cmd: subprocess.run(cmd, env=_apt_env()).returncode,
) -> tuple[bool, str]:
    """(ok, message): installs the missing packages as root with apt-get, else says what to run."""
    missing = missing_packages(which)
    if not missing:
        return True, ""
    names = " ".join(missing)
    root = os.geteuid() == 0 if is_root is None else is_root
    if not root or not which("apt-get"):
        return False, (
            f"make test needs Debian's {names} (the site check's browser, the grading sandbox, the PDF's "
            "text); "
            f"install them first: sudo apt-get install {names}"
        )
    print(f"installing Debian's {names} for make test", flush=True)
    if run(["apt-get", "update", "-qq"]) or run(install_command(missing)):
        return False, f"apt-get could not install {names} (its message is above)"
    still = missing_packages(which)
    if still:
        return False, f"apt-get installed {names}, but no program of {' '.join(still)} is found"
    return True, f"installed {names}"


def _apt_env() -> dict[str, str]:
    return dict(os.environ, DEBIAN_FRONTEND="noninteractive")


def main() -> int:
    ok, message = ensure()
    if message:
        print(message, file=sys.stdout if ok else sys.stderr, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
