"""The scratch environment every benchmark runs in (not a benchmark itself)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def scratch_environment(
    scratch: Path, *, name: str, extra_tools: str = ""
) -> list[subprocess.Popen[bytes]]:
    """Point this process (and the workers it starts) at a scratch database and Redis.

    ``REDIS_URL`` is used when set, else an embedded Redis is started (returned,
    for the caller to stop); ``BENCH_DATABASE_URL`` selects the database, else a
    scratch SQLite file.
    """
    owned: list[subprocess.Popen[bytes]] = []
    if not os.environ.get("REDIS_URL"):
        from agentsite.core.embedded_redis import start_embedded_redis

        process, url = start_embedded_redis(scratch / "redis")
        owned.append(process)
        os.environ["REDIS_URL"] = url
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", f"sqlite:///{scratch / 'bench.sqlite3'}"
    )
    os.environ["AGENTSITE_REDIS_PREFIX"] = f"bench-{name}-{os.getpid()}"
    if extra_tools:
        os.environ["AGENTSITE_EXTRA_TOOLS"] = extra_tools
    os.environ["DJANGO_SETTINGS_MODULE"] = "agentsite.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # One bench user floods the server on purpose; the per-user quotas (tested in the
    # suite) would refuse it, and throughput is what a benchmark measures.
    for quota in ("LIVE_JOBS", "LIVE_TURNS", "MESSAGES_PER_MINUTE", "MCP_SESSIONS"):
        os.environ.setdefault(f"AGENTSITE_QUOTA_{quota}", "0")
    return owned


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def tool_workers_start(scratch: Path, count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` RQ workers on ``tools`` against the scratch environment, logging to it."""
    from django.conf import settings

    log = open(scratch / "workers.log", "ab")  # open as long as the workers run
    return [
        subprocess.Popen(
            [sys.executable, str(settings.BASE_DIR / "manage.py"), "rqworker", "tools", "-v", "0"],
            cwd=settings.BASE_DIR,
            env=dict(os.environ),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for _ in range(count)
    ]


def tool_workers_wait(count: int) -> None:
    """Return once ``count`` workers listen on ``tools``."""
    import django_rq
    from rq import Worker

    queue = django_rq.get_queue("tools")
    deadline = time.monotonic() + 30
    while len(Worker.all(queue=queue)) < count:
        if time.monotonic() > deadline:
            raise SystemExit("workers did not start")
        time.sleep(0.1)
