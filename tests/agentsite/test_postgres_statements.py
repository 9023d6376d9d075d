"""On PostgreSQL, parameters are bound by the server and repeated statements prepared."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's statements"),
]


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_query_run_again_and_again_is_prepared_once_on_the_server(make_user: Any) -> None:
    user = make_user("prepared")
    users = get_user_model().objects
    for _ in range(connection.connection.prepare_threshold + 1):
        assert users.get(pk=user.pk).username == "prepared"

    prepared = [sql for sql in prepared_statements() if 'FROM "auth_user"' in sql]
    assert len(prepared) == 1, prepared
    assert "$1" in prepared[0]  # the parameter travelled apart from the statement


def test_text_with_quotes_round_trips_as_a_bound_parameter(make_user: Any) -> None:
    name = "o'brien; DROP TABLE auth_user; --"
    user = make_user(name)
    for _ in range(10):  # as sent before and after the statement is prepared
        assert get_user_model().objects.filter(username=name).get().pk == user.pk
