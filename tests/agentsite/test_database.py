"""Workers wait for a restarted database instead of failing (agentsite.core.database)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, OperationalError, connection, connections

from agentsite.core.database import connections_keep_if_sound, through_database_outage
from agentsite.core.embedded_redis import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def database_away_for(seconds: float) -> Iterator[None]:
    """New connections fail (nothing listens, or no such file) until ``seconds`` have passed.

    Every thread's connection is made from the same settings, so this holds for
    the threads a test starts too; connections already open stay open.
    """
    original = dict(connection.settings_dict)
    connections.close_all()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-directory/agentsite.sqlite3"
    else:
        connection.settings_dict["PORT"] = str(free_port())
    back = threading.Timer(seconds, lambda: connection.settings_dict.update(original))
    back.start()
    try:
        yield
    finally:
        back.cancel()
        connection.settings_dict.update(original)


def count_users() -> int:
    return get_user_model().objects.count()


def test_an_action_waits_for_the_database_and_then_runs(make_user: Any) -> None:
    make_user("alice")
    with database_away_for(1.5):
        with pytest.raises(OperationalError):
            count_users()  # really away
        # Before: one more try at once, then the error (and the tool worker quit).
        assert through_database_outage(count_users, what="counting") == 1


def in_a_thread(action: Any) -> Any:
    """``action()`` in a thread of its own, with its own connections (as a worker's pool)."""
    outcome: dict[str, Any] = {}

    def main() -> None:
        try:
            outcome["value"] = action()
        except BaseException as exc:  # handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=main)
    thread.start()
    thread.join(30)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def test_a_sound_connection_is_kept_for_the_next_unit_of_work(make_user: Any) -> None:
    make_user("kept")
    User = get_user_model()

    def two_units() -> bool:
        User.objects.filter(username="kept").exists()
        first = connection.connection
        connections_keep_if_sound()
        User.objects.filter(username="kept").exists()
        kept = first is not None and connection.connection is first
        connections.close_all()
        return kept

    assert in_a_thread(two_units) is True


def test_a_connection_an_error_occurred_on_is_closed_after_its_unit(make_user: Any) -> None:
    def failing_unit() -> tuple[bool, bool]:
        connection.ensure_connection()
        with pytest.raises(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_here")
        connections_keep_if_sound()
        closed = connection.connection is None
        User = get_user_model()
        works = not User.objects.filter(username="nobody").exists()  # a new connection
        connections.close_all()
        return closed, works

    assert in_a_thread(failing_unit) == (True, True)
