"""Run every benchmark under bench/ in turn (``make bench``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failures = 0
    scripts = sorted(
        p for p in HERE.glob("*.py") if p.name != "run.py" and not p.name.startswith("_")
    )
    if not scripts:
        print("no benchmarks yet")
        return 0
    for script in scripts:
        print(f"=== {script.name}", flush=True)
        failures += subprocess.call([sys.executable, str(script)], cwd=HERE.parent) != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
