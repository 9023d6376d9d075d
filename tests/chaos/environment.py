"""The chaos suite's own servers, started before Django reads its settings.

Loaded as a pytest plugin (``make chaos``: ``pytest -p tests.chaos.environment
tests/chaos/suite.py``): a PostgreSQL cluster and a Redis server that belong to
this run alone, so the suite may restart and kill them. The test database is
created and migrated on that cluster by pytest-django as usual.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.servers import OwnPostgres, OwnRedis, postgres_bin_dir

if postgres_bin_dir() is None:
    raise pytest.UsageError(
        "The chaos suite runs a PostgreSQL server of its own and needs its programs "
        "(initdb, pg_ctl): install PostgreSQL's server package (Debian: postgresql)."
    )
POSTGRES = OwnPostgres(Path(tempfile.mkdtemp(prefix="agentsite-chaos-pg-")))
atexit.register(POSTGRES.remove)
POSTGRES.create()
POSTGRES.start()

_redis_dir = Path(tempfile.mkdtemp(prefix="agentsite-chaos-redis-"))
REDIS = OwnRedis(_redis_dir)
atexit.register(shutil.rmtree, _redis_dir, ignore_errors=True)
atexit.register(REDIS.kill)
REDIS.start()

os.environ["DATABASE_URL"] = POSTGRES.url
os.environ["REDIS_URL"] = REDIS.url
