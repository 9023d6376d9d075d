"""A turn rides out a database restart: its queries wait, and broken connections are replaced."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import connection

from sessions.runtime import TurnRuntime
from tests.agentsite.test_database import database_away_for

pytestmark = pytest.mark.django_db(transaction=True)


def count_users() -> int:
    return get_user_model().objects.count()


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def end_session(pid: int) -> None:
    """What a restart does to every connection open at the time."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_turns_query_waits_while_the_database_is_away(make_user: Any) -> None:
    make_user("alice")
    runtime = TurnRuntime(db_threads=1)
    try:
        with database_away_for(1.5):
            # Before: the OperationalError reached the turn, which failed as internal_error.
            assert async_to_sync(runtime.db)(count_users) == 1
    finally:
        runtime.db_pool.shutdown()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="ends server sessions")
def test_a_connection_a_restart_broke_is_replaced_on_its_next_query(make_user: Any) -> None:
    make_user("alice")
    runtime = TurnRuntime(db_threads=1)
    try:
        pid = async_to_sync(runtime.db)(backend_pid)  # the thread keeps its connection
        end_session(pid)
        # Before: the first query on the broken connection failed the turn.
        assert async_to_sync(runtime.db)(count_users) == 1
    finally:
        runtime.db_pool.shutdown()
