"""The hosts suite's settings, set before Django reads them.

Loaded as a pytest plugin (``make hosts``: ``pytest -p tests.hosts.environment
tests/hosts/suite.py``). The servers themselves are started by the suite's
fixtures (``tests/hosts/suite.py``), inside their namespaces; here only their
addresses are fixed, for the test process and every process it starts: the
database on the ``pg1`` and ``pg2`` hosts (one URL naming both), Redis through
the three sentinels, one secret key for both web hosts (a continuation token
signed by one is good on the other).

Where namespaces cannot be built (not root, no ``ip netns``) or a program is
missing, nothing is set and the suite skips, saying why (``UNAVAILABLE``).
"""

from __future__ import annotations

import os
import secrets
import shutil

from tests.hosts.network import HOSTS, unavailable
from tests.servers import postgres_bin_dir

WEB_PORT = 8000
PG_PORT = 5432
PROXY_PORT = 8080
REDIS_PORT = 6379
SENTINEL_PORT = 26379
SENTINEL_MASTER = "agentsite"
REDIS_HOSTS = ("redis1", "redis2", "redis3")


def missing_program() -> str | None:
    if postgres_bin_dir() is None:
        return "the hosts suite needs PostgreSQL's initdb and pg_ctl (Debian: postgresql)"
    if shutil.which("redis-server") is None:
        return "the hosts suite needs the machine's redis-server (Debian: redis-server)"
    if shutil.which("nginx") is None:
        return "the hosts suite needs nginx (Debian: nginx-light; .ci/run installs it as root)"
    return None


UNAVAILABLE = unavailable() or missing_program()

if UNAVAILABLE is None:
    # Both PostgreSQL hosts: libpq keeps the one that takes writes, the primary (pg1)
    # until pg2 is promoted. A host that does not answer is given 2 s.
    os.environ["DATABASE_URL"] = (
        f"postgres://postgres@{HOSTS['pg1']}:{PG_PORT},{HOSTS['pg2']}:{PG_PORT}/postgres"
        "?target_session_attrs=read-write&connect_timeout=2"
    )
    os.environ["REDIS_URL"] = ""
    os.environ["REDIS_SENTINELS"] = ",".join(
        f"{HOSTS[host]}:{SENTINEL_PORT}" for host in REDIS_HOSTS
    )
    os.environ["REDIS_SENTINEL_MASTER"] = SENTINEL_MASTER
    # The data nodes ask for a password, as they should off loopback.
    os.environ["REDIS_PASSWORD"] = secrets.token_urlsafe(16)
    os.environ["AGENTSITE_REDIS_PREFIX"] = "hosts"
    os.environ["SECRET_KEY"] = secrets.token_urlsafe(50)
    # Requests come through the proxy by its address; the hosts are asked directly too.
    os.environ["ALLOWED_HOSTS"] = ",".join(HOSTS[host] for host in ("proxy", "web1", "web2"))
