"""Run every benchmark under bench/ in turn (``make bench``), each as ``python -m bench.NAME``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# What the benchmarks are made of, not benchmarks themselves.
NOT_BENCHMARKS = {"__init__", "run", "support"}


def main() -> int:
    failures = 0
    names = sorted(
        p.stem
        for p in HERE.glob("*.py")
        if p.stem not in NOT_BENCHMARKS and not p.stem.startswith("_")
    )
    if not names:
        print("no benchmarks yet")
        return 0
    for name in names:
        print(f"=== {name}", flush=True)
        failures += subprocess.call([sys.executable, "-m", f"bench.{name}"], cwd=HERE.parent) != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
