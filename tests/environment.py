"""Test environment, loaded as a pytest plugin before Django reads its settings.

The suite always uses a real Redis: ``REDIS_URL`` when set; else a Redis
answering on 127.0.0.1:6379, on database 15 (``AGENTSITE_TEST_REDIS_DB``),
which the suite may flush; else
an embedded redis-server started for the run.
"""

from __future__ import annotations

import atexit
import os
import tempfile
from pathlib import Path

from agentsite.core.embedded_redis import redis_answers, start_embedded_redis

LOCAL_REDIS_URL = f"redis://127.0.0.1:6379/{os.environ.get('AGENTSITE_TEST_REDIS_DB', '15')}"


def choose_redis() -> tuple[str, bool]:
    """The Redis URL for the run, and whether the suite owns it (may flush it)."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"], False
    if redis_answers(LOCAL_REDIS_URL):
        return LOCAL_REDIS_URL, True
    process, url = start_embedded_redis(Path(tempfile.mkdtemp(prefix="agentsite-redis-")))
    atexit.register(process.terminate)
    return url, True


REDIS_URL, REDIS_OWNED = choose_redis()
os.environ["REDIS_URL"] = REDIS_URL
os.environ["AGENTSITE_REDIS_PREFIX"] = f"agentsite-test-{os.getpid()}"
# Test servers (webhook receivers, crawl targets, the fake Messages API) live on loopback.
os.environ.setdefault("AGENTSITE_ALLOWED_PRIVATE_HOSTS", "127.0.0.1,localhost")
os.environ.setdefault("AGENTSITE_MODEL", "offline")
# The test tools exist in this process and in every worker and server the suite
# starts, whichever tests happen to start those first.
os.environ["AGENTSITE_EXTRA_TOOLS"] = ",".join(
    ["tests.jobs.tools_for_tests", "tests.sessions.tools_for_tests", "tests.mcp.tools_for_tests"]
)

if REDIS_OWNED:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
