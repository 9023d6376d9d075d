"""Workers wait for a restarted database instead of failing (agentsite.core.database)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, connections

from agentsite.core.database import through_database_outage
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
