"""A DATABASE_URL may list several PostgreSQL hosts: libpq keeps the first that accepts writes."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from agentsite.core.database_url import DEAD_PEER_OPTIONS, database_url_parse
from agentsite.core.embedded_redis import free_port
from tests.conftest import BASE_DIR

LIVE = os.environ.get("AGENTSITE_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres")

WRITE = """
import django
django.setup()
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("CREATE TEMPORARY TABLE written (x integer)")
    cursor.execute("INSERT INTO written VALUES (1)")
    cursor.execute("SELECT count(*), inet_server_port() FROM written")
    print(*cursor.fetchone())
    params = connection.connection.info.get_parameters()
    print(params.get("keepalives_idle"), params.get("tcp_user_timeout"))
"""


def postgres_answers() -> bool:
    try:
        psycopg.connect(LIVE, connect_timeout=2).close()
        return True
    except psycopg.Error:
        return False


def test_several_hosts_become_libpq_host_and_port_lists() -> None:
    url = "postgres://u:p@db1:5432,db2:5433/app?target_session_attrs=read-write"
    config = database_url_parse(url)
    assert config["HOST"] == "db1,db2"
    assert config["PORT"] == "5432,5433"
    assert config["USER"] == "u" and config["PASSWORD"] == "p" and config["NAME"] == "app"
    assert config["OPTIONS"] == {**DEAD_PEER_OPTIONS, "target_session_attrs": "read-write"}


def test_a_postgresql_connection_gives_a_silent_host_up_in_seconds() -> None:
    options = database_url_parse("postgres://u@db1:5432/app")["OPTIONS"]
    assert options["keepalives"] == 1
    assert (
        options["keepalives_idle"] + options["keepalives_interval"] * options["keepalives_count"]
        <= 10
    )
    assert options["tcp_user_timeout"] <= 10_000
    assert options["connect_timeout"] <= 5


def test_the_urls_own_parameters_win() -> None:
    url = "postgres://u@db1:5432,db2:5432/app?connect_timeout=2&tcp_user_timeout=3000"
    options = database_url_parse(url)["OPTIONS"]
    assert (options["connect_timeout"], options["tcp_user_timeout"]) == (2, 3000)
    assert options["keepalives_idle"] == 5


def test_sqlite_gets_no_tcp_options() -> None:
    assert "keepalives" not in database_url_parse("sqlite:///x.sqlite3").get("OPTIONS", {})


def test_one_host_parses_as_before() -> None:
    config = database_url_parse("postgres://u@db1:5432/app")
    assert (config["HOST"], config["PORT"], config["NAME"]) == ("db1", 5432, "app")


@pytest.mark.parametrize(
    "url",
    ["postgres://u@db1:5432,:5433/app", "postgres://u@db1:x,db2/app", "sqlite://a,b/file"],
)
def test_a_broken_host_list_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        database_url_parse(url)


@pytest.mark.slow
@pytest.mark.skipif(not postgres_answers(), reason="no PostgreSQL on 127.0.0.1:5432")
def test_a_dead_first_host_is_passed_over_for_the_live_one() -> None:
    live = psycopg.conninfo.conninfo_to_dict(LIVE)
    dead_port = free_port()  # nothing listens there
    url = (
        f"postgres://{live.get('user', 'postgres')}@127.0.0.1:{dead_port},"
        f"{live['host']}:{live.get('port', 5432)}/{live['dbname']}"
        "?target_session_attrs=read-write&connect_timeout=5"
    )
    result = subprocess.run(
        [sys.executable, "-c", WRITE],
        cwd=BASE_DIR,
        env={**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "agentsite.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", str(live.get("port", 5432)), "5", "5000"]
