"""The suite's own environment: two test runs on one machine keep to their own Redis."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from tests import environment


def test_a_database_held_by_another_run_is_passed_over() -> None:
    """Before: every run used database 15 (14 for gw1) of the local Redis, so a targeted
    run beside ``make test`` shared its queues, and each run's workers took the other's jobs
    (seen as 20 s timeouts). Now a database held by another process is skipped."""
    claims = len(environment._CLAIMS)
    first = environment.claim_local_database(9)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            f"lock = open({str(Path(tempfile.gettempdir()) / 'agentsite-test-redis-')!r}"
            f" + sys.argv[1] + '.lock', 'w')\n"
            "fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
            str(first - 1),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        second = environment.claim_local_database(first)
        assert second < first - 1, (first, second)
    finally:
        holder.kill()
        holder.wait()
        for lock in environment._CLAIMS[claims:]:
            lock.close()
        del environment._CLAIMS[claims:]
