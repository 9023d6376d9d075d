"""The statements a message and a turn cost: the router's work is paid on every
message and every turn, by every user at once (bench/concurrency.py).

Before: a message cost 16 statements and a turn's start 17 (two session locks, a
seq read after its bump, a savepoint per event, a second look for a queued run).
The counts include the savepoint pair the test's own transaction adds around
each call. A message pays two statements for its owner's quotas (the user's own
limits, the live turns), and on PostgreSQL a third for the per-user lock that
SQLite's write lock already gives; the messages-a-minute window lives in Redis.
The first message of a session without a title pays one more, for the title
(``sessions.titles``); a titled session's messages do not.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from sessions.runs import run_complete, run_start
from sessions.services import message_post, session_create


def test_a_message_costs_eleven_statements_at_most(
    user: Any, django_assert_max_num_queries: Any
) -> None:
    session = session_create(owner=user)
    message_post(session=session, text="warm")  # a first message creates the session's run
    other = session_create(owner=user, title="Greeting")
    with django_assert_max_num_queries(12 if connection.vendor == "postgresql" else 11):
        event, run = message_post(session=other, text="hello")
    assert event.pending and run.status == "queued"


def test_the_first_message_of_an_untitled_session_pays_one_more_for_its_title(
    user: Any, django_assert_max_num_queries: Any
) -> None:
    session = session_create(owner=user)
    message_post(session=session, text="warm")
    other = session_create(owner=user)
    with django_assert_max_num_queries(13 if connection.vendor == "postgresql" else 12):
        message_post(session=other, text="hello")
    other.refresh_from_db()
    assert other.title == "hello"
    with django_assert_max_num_queries(12 if connection.vendor == "postgresql" else 11):
        message_post(session=other, text="and again")


def test_a_turn_starts_and_ends_in_twelve_statements_each_at_most(
    user: Any, django_assert_max_num_queries: Any
) -> None:
    session = session_create(owner=user)
    _, run = message_post(session=session, text="hello")
    with django_assert_max_num_queries(12):
        claim = run_start(run_id=run.id)
    assert claim is not None and len(claim.batch) == 1
    with django_assert_max_num_queries(12):
        assert run_complete(run_id=run.id, usage={"input_tokens": 1, "output_tokens": 1})
    session.refresh_from_db()
    assert session.state == "idle"
