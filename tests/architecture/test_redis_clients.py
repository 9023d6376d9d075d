"""Every Redis client comes from agentsite/core/redis_connections.py (or RQ_QUEUES and the
channel layer, which it configures), so that none bypasses Redis Sentinel."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import BASE_DIR

APPS = ("agentsite", "accounts", "jobs", "sessions", "responses", "a2a_api")
# The embedded Redis is a server of its own, started only when nothing else is configured.
ALLOWED = {"agentsite/core/redis_connections.py", "agentsite/core/embedded_redis.py"}
CLIENT_MADE = re.compile(r"\b(Redis\.from_url|Redis\(|StrictRedis|Sentinel\(|ConnectionPool\b)")


def test_no_module_builds_a_redis_client_of_its_own() -> None:
    offenders = []
    for app in APPS:
        for path in sorted((BASE_DIR / app).rglob("*.py")):
            name = str(path.relative_to(BASE_DIR))
            if name in ALLOWED or "/migrations/" in name:
                continue
            for number, line in enumerate(Path(path).read_text().splitlines(), 1):
                if CLIENT_MADE.search(line):
                    offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []
