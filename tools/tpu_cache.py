"""Keeps in shardbook/data/tpu_compiled only the programs a whole run of the book and its tests used.

``make tpu-cache`` runs every chapter and tests/test_tpu.py with ``$SHARDBOOK_TPU_USED`` naming a file
(shardbook.tpu notes there each program it compiles or reads back), then calls

    python tools/tpu_cache.py prune USED_FILE

which deletes every cached program not listed: a program that changed left its old entry behind. It
refuses to prune from an empty or missing list (a run that noted nothing would empty the cache).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: tools/ is a package of the repository root
    sys.path.insert(0, str(ROOT))

from shardbook import tpu  # noqa: E402


def prune(used_file: Path, folder: Path) -> tuple[int, int]:
    """Deletes the entries of ``folder`` whose fingerprint ``used_file`` does not list: (kept, deleted)."""
    used = set(used_file.read_text().split()) if used_file.exists() else set()
    if not used:
        raise SystemExit(
            f"{used_file} lists no program: nothing pruned (did the run set {tpu.USED_LOG_VARIABLE}?)"
        )
    kept = deleted = 0
    for entry in sorted(folder.glob("*.json.gz")):
        if entry.name.removesuffix(".json.gz") in used:
            kept += 1
        else:
            entry.unlink()
            deleted += 1
    return kept, deleted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prune")
    p.add_argument("used_file", type=Path)
    args = parser.parse_args()
    kept, deleted = prune(args.used_file, tpu.cache_folder())
    print(f"{tpu.cache_folder().relative_to(ROOT)}: kept {kept} programs, deleted {deleted} no run used")


if __name__ == "__main__":
    main()
