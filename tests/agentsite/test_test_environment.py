"""The suite's own environment: two test runs, or two test workers, keep to their own servers."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from agentsite.core import embedded_redis
from tests import environment
from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_serve


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


def test_a_daphne_whose_port_is_taken_first_is_started_on_another(
    processes: Processes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a port found free could be bound by another test worker's daphne before
    this one bound it; this daphne failed to listen and exited, but the port answered
    (the other server, on another test database), so every test behind it got 401s."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    lost, free = taken.getsockname()[1], embedded_redis.free_port()
    ports = iter([lost, free])
    monkeypatch.setattr(embedded_redis, "free_port", lambda: next(ports))
    log = processes.artifact("daphne-port-taken")
    seen = log.stat().st_size if log.exists() else 0
    try:
        url = daphne_serve(processes, name="daphne-port-taken")
    finally:
        taken.close()
    assert url == f"http://127.0.0.1:{free}"
    assert httpx.get(f"{url}/api/me", timeout=10).status_code == 401  # it serves the app
    said = log.read_bytes()[seen:].decode()
    assert f"Listen failure: Couldn't listen on 127.0.0.1:{lost}" in said, said
    processes.stop(processes.named("daphne-port-taken"))
