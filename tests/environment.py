"""Test environment, loaded as a pytest plugin before Django reads its settings.

The suite always uses a real Redis: ``REDIS_URL`` when set; else a Redis
answering on 127.0.0.1:6379, on database 15 (``AGENTSITE_TEST_REDIS_DB``),
which the suite may flush; else
an embedded redis-server started for the run.

Under pytest-xdist (``make test`` runs two workers) each worker is a run of its
own: RQ's queue names carry no prefix, so each worker gets a Redis database of
its own. On the local Redis a test process claims the first database from
``AGENTSITE_TEST_REDIS_DB - N`` (worker ``gwN``) downwards that no other test
process on this machine holds, by a lock on a file in the temporary directory,
held until the process ends: two suites run at once (two checkouts, or a
targeted run beside ``make test``) never take each other's jobs. With an
explicit ``REDIS_URL`` ending in ``/D`` worker ``gwN`` uses database ``D + N``;
with an embedded Redis, one of its own. A process that could not have its usual
Redis database also gets a test database of its own (``AGENTSITE_TEST_DB``
``test_rD``). The test database gets a ``_gwN`` suffix from pytest-django, the
logs go to ``test-artifacts/<db>/gwN/``.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import tempfile
from pathlib import Path
from typing import TextIO
from urllib.parse import parse_qsl, urlencode, urlparse

import pytest

from agentsite.core.embedded_redis import redis_answers, start_embedded_redis

# "gw0", "gw1", ... in a pytest-xdist worker (set before plugins load); "" otherwise.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
XDIST_INDEX = int(XDIST_WORKER[2:]) if XDIST_WORKER.startswith("gw") else 0


# Lock files of the local Redis databases this process holds; open until it exits.
_CLAIMS: list[TextIO] = []


def claim_local_database(first: int) -> int:
    """The first database from ``first`` downwards no other test process holds."""
    for database in range(first, -1, -1):
        lock = open(  # held open for the life of the process
            Path(tempfile.gettempdir()) / f"agentsite-test-redis-{database}.lock", "w"
        )
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _CLAIMS.append(lock)
        return database
    raise RuntimeError(
        f"every local Redis database from {first} down is held by another test run: "
        "wait for one to end, or raise AGENTSITE_TEST_REDIS_DB"
    )


LOCAL_REDIS = "redis://127.0.0.1:6379"


def local_first_database() -> int:
    """The local Redis database this process tries first: ``AGENTSITE_TEST_REDIS_DB - N``."""
    base = int(os.environ.get("AGENTSITE_TEST_REDIS_DB", "15"))
    if base - XDIST_INDEX < 0:
        raise RuntimeError(
            f"xdist worker {XDIST_WORKER} would use Redis database {base - XDIST_INDEX}: "
            f"raise AGENTSITE_TEST_REDIS_DB ({base}) or run fewer workers"
        )
    return base - XDIST_INDEX


def with_database_offset(url: str, offset: int) -> str:
    """``url`` with its Redis database number raised by ``offset``."""
    if offset == 0:
        return url
    parts = urlparse(url)
    query = dict(parse_qsl(parts.query))
    if "db" in query:
        query["db"] = str(int(query["db"]) + offset)
        return parts._replace(query=urlencode(query)).geturl()
    if parts.scheme == "unix":
        query["db"] = str(offset)
        return parts._replace(query=urlencode(query)).geturl()
    db = int(parts.path.strip("/") or 0)
    return parts._replace(path=f"/{db + offset}").geturl()


# The REDIS_URL the person gave; not one that the xdist controller, which loads this
# plugin too, chose for itself and left in the environment its workers inherit.
GIVEN_REDIS_URL = os.environ.setdefault(
    "AGENTSITE_TEST_GIVEN_REDIS_URL", os.environ.get("REDIS_URL", "")
)


# The test database name the person gave (AGENTSITE_TEST_DB); likewise not one the
# controller chose for itself.
GIVEN_TEST_DB = os.environ.setdefault(
    "AGENTSITE_TEST_GIVEN_DB", os.environ.get("AGENTSITE_TEST_DB", "")
)


def choose_redis() -> tuple[str, bool]:
    """The Redis URL for the run, and whether the suite owns it (may flush it)."""
    if GIVEN_REDIS_URL:
        return with_database_offset(GIVEN_REDIS_URL, XDIST_INDEX), False
    first = local_first_database()
    if redis_answers(f"{LOCAL_REDIS}/{first}"):
        database = claim_local_database(first)
        if not GIVEN_TEST_DB:
            # Another run holds the usual database when this one did not get it, and
            # maybe the usual test database too.
            os.environ["AGENTSITE_TEST_DB"] = "test" if database == first else f"test_r{database}"
        return f"{LOCAL_REDIS}/{database}", True
    process, url = start_embedded_redis(Path(tempfile.mkdtemp(prefix="agentsite-redis-")))
    atexit.register(process.terminate)
    return url, True


REDIS_URL, REDIS_OWNED = choose_redis()
os.environ["REDIS_URL"] = REDIS_URL
os.environ["AGENTSITE_REDIS_PREFIX"] = f"agentsite-test-{os.getpid()}"
# Test servers (webhook receivers, crawl targets, the fake Messages API) live on loopback.
os.environ.setdefault("AGENTSITE_ALLOWED_PRIVATE_HOSTS", "127.0.0.1,localhost")
os.environ.setdefault("AGENTSITE_MODEL", "offline")
# The scripted model stands in for a real one in the tests of the agent loop.
os.environ.setdefault("AGENTSITE_SCRIPTED_MODEL", "true")
# The tests of what the agent's tools do let the agent call them at once; the tests of
# approvals (tests/sessions/test_approvals*.py, tests/browser/test_approvals.py, …)
# require them per user (the admin's rules, which win over this setting) or set it.
os.environ["AGENTSITE_TOOL_APPROVALS"] = "run_tests=never,crawl_site=never,http_get=never"
# The test tools exist in this process and in every worker and server the suite
# starts, whichever tests happen to start those first.
os.environ["AGENTSITE_EXTRA_TOOLS"] = ",".join(
    ["tests.jobs.tools_for_tests", "tests.sessions.tools_for_tests", "tests.mcp.tools_for_tests"]
)

if REDIS_OWNED:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


def pytest_configure(config: pytest.Config) -> None:
    """An xdist controller runs no test: it gives its Redis database back to its workers."""
    if not XDIST_WORKER and (getattr(config.option, "numprocesses", None) or 0) > 0:
        for lock in _CLAIMS:
            lock.close()
        _CLAIMS.clear()
