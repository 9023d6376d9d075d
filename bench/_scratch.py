"""The scratch environment every benchmark runs in (not a benchmark itself)."""

from __future__ import annotations

import os
import subprocess
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
