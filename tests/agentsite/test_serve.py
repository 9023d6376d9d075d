"""`manage.py serve` (what `make run` starts): the whole stack up, then down with no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agentsite.core.embedded_redis import free_port
from tests.conftest import BASE_DIR, alive


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def worker_pid(root: int, needle: str, *, missing_ok: bool = False) -> int | None:
    """The pid among ``root``'s descendants whose command line contains ``needle``
    (the worker's main process: the one whose parent is not such a process)."""
    matches = []
    for pid in descendants(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmdline and alive(pid):
            matches.append(pid)
    mains = [pid for pid in matches if parent_of(pid) not in matches]
    if not mains and missing_ok:
        return None
    assert len(mains) == 1, mains
    return mains[0]


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def wakeups(pid: int) -> int:
    """How many times the process's main thread has gone to sleep and been woken."""
    for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


@pytest.mark.timeout(180)
def test_serve_runs_all_restarts_a_dead_one_and_ctrl_c_stops_them_all(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'serve.sqlite3'}",
        AGENTSITE_ADMIN_USER="operator",
        AGENTSITE_ADMIN_PASSWORD="a-long-password",
        PYTHONUNBUFFERED="1",
    )
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        health = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                if health.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        output = (tmp_path / "serve.log").read_text()
        assert health is not None and health.status_code == 200, output
        assert health.json() == {"status": "ok"}  # the details are for staff or a token
        token = subprocess.run(
            [sys.executable, "manage.py", "create_api_token", "operator"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            check=True,
            text=True,
        ).stdout.strip()
        authorized = {"Authorization": f"Bearer {token}"}
        body = httpx.get(f"http://127.0.0.1:{port}/healthz", headers=authorized, timeout=5).json()
        assert body["workers"]["turns"]["ok"] and body["workers"]["tools"]["ok"]
        assert "embedded Redis" in output
        assert "operator" in output
        assert "a-long-password" not in output  # the password from the environment
        for prefix in ("web", "turns1", "tools1", "cron", "redis"):
            assert f"{prefix} " in output or f"{prefix}|" in output.replace(" ", ""), prefix

        login = httpx.get(f"http://127.0.0.1:{port}/login/", timeout=5)
        assert login.status_code == 200 and "Log in" in login.text

        # Idle, the supervisor looks at its children once a second (a child's exit wakes it
        # at once, below), where it woke every 0.3 s: ten times in three seconds.
        # So does the embedded Redis with its background tasks (``--hz 1``), where it ran
        # them ten times a second: thirty wakes in three seconds before any client's.
        redis_server = worker_pid(proc.pid, "redis-server")
        assert redis_server is not None
        before, redis_before = wakeups(proc.pid), wakeups(redis_server)
        time.sleep(3)
        assert wakeups(proc.pid) - before <= 6
        assert wakeups(redis_server) - redis_before <= 20

        # A child that dies is started again; the rest keep running. (Before: the
        # whole app stopped when one child exited.)
        tool_worker = worker_pid(proc.pid, "rqworker tools")
        assert tool_worker is not None
        os.kill(tool_worker, signal.SIGKILL)
        deadline = time.monotonic() + 30
        replacement = None
        while time.monotonic() < deadline and replacement is None:
            time.sleep(0.3)
            found = worker_pid(proc.pid, "rqworker tools", missing_ok=True)
            replacement = found if found not in (None, tool_worker) else None
        output = (tmp_path / "serve.log").read_text()
        assert replacement is not None, output
        assert "tools1 exited with code -9; starting it again in 1s" in output
        assert proc.poll() is None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            health = httpx.get(f"http://127.0.0.1:{port}/healthz", headers=authorized, timeout=2)
            if health.status_code == 200 and health.json()["workers"]["tools"]["ok"]:
                break
            time.sleep(0.5)
        assert health.status_code == 200, health.text

        started = descendants(proc.pid)
        assert len(started) >= 5
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=40) == 0
        time.sleep(0.5)
        leftovers = [pid for pid in started if alive(pid)]
        assert leftovers == [], (tmp_path / "serve.log").read_text()
    finally:
        if proc.poll() is None:  # a failure above: stop the stack as Ctrl-C would, no orphans
            stack = descendants(proc.pid)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
            for pid in stack:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        log.close()
