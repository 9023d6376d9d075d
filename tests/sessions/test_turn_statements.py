"""The statements one model turn costs, on each side of the queue, pinned.

Every user's every turn pays them: the web process when it accepts the message,
the turn worker when it runs the turn (``bench/turn_cost.py`` measures the same
with the offline model). A change that adds one fails here; one that saves one
lowers the pin. The counts are of statements Django runs through its cursors
(``connection.execute_wrapper``): savepoints and SQLite's ``BEGIN IMMEDIATE``
included, a transaction's COMMIT and PostgreSQL's BEGIN not.

The web side: the token, the session, its owner's limits, then in one
transaction the session's lock, the owner's live turns (on PostgreSQL after the
per-user lock SQLite's write lock already gives), the seq and the message (one
statement on PostgreSQL), the session's live runs, the new run and the session's
state.

The turn worker: the claim (the run with its session locked, the session's live
runs, the pending events, the claim's compare-and-set, the events taken, the
``run_started`` event), the conversation (past runs, their events), the events
in a transaction for each write (the first delta at once; the message with any
delta still waiting), and the end (the run with its session locked, the run's
end with its first token's time, its event, the live runs, the pending events,
the session's state). A session that no A2A task watches costs
no push-notification look.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.signals import connection_created
from django.test import Client

from sessions import runs
from sessions.llm.scripted import scripted_push
from sessions.models import AgentSession, Run
from sessions.runtime import TurnRuntime
from sessions.services import session_create

pytestmark = pytest.mark.django_db(transaction=True)

POSTGRES = connection.vendor == "postgresql"
# SQLite opens each transaction with a statement of its own (BEGIN IMMEDIATE): one on
# the web side, where PostgreSQL pays the per-user lock instead, and four in the turn
# worker (the claim, two events, the end). On PostgreSQL an event's seq and its row
# are one statement (``sessions.events``): one less for each of the turn's events.
WEB = 10 if POSTGRES else 11
WORKER = 16 if POSTGRES else 24


class Statements:
    """The statements run through Django, by side: the test's thread (the web side) and
    the threads of the turn's database pool (the turn worker)."""

    def __init__(self) -> None:
        self.web: list[str] = []
        self.worker: list[str] = []
        self.main = threading.get_ident()

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        (self.web if threading.get_ident() == self.main else self.worker).append(sql)
        return execute(sql, params, many, context)

    def watch(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        # A thread's connection object connects anew after each close.
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)

    def clear(self) -> None:
        self.web.clear()
        self.worker.clear()


@pytest.fixture(autouse=True)
def runs_kept_from_workers(monkeypatch: Any) -> None:
    """The test runs its turns itself: a turn worker of the suite's must not take them."""
    monkeypatch.setattr(runs, "run_enqueue", lambda run_id, **kwargs: None)


@pytest.fixture
def statements() -> Iterator[Statements]:
    counter = Statements()
    connection_created.connect(counter.watch)  # the pool's connections, opened per call
    try:
        with connection.execute_wrapper(counter):
            yield counter
    finally:
        connection_created.disconnect(counter.watch)


def message(client: Client, session: AgentSession, text: str) -> str:
    response = client.post(
        f"/api/sessions/{session.id}/messages", {"text": text}, content_type="application/json"
    )
    assert response.status_code == 202, response.content
    run_id: str = response.json()["run_id"]
    return run_id


def turn(run_id: str) -> str:
    """The turn as a turn worker runs it, on a database pool of its own (without the
    watcher, whose statements serve all of a worker's turns at once)."""
    runtime = TurnRuntime(db_threads=1, tool_threads=1, close_connections=True)
    try:
        return asyncio.run(runtime.execute(run_id))
    finally:
        runtime.shutdown()


def numbered(sql: list[str]) -> str:
    return "\n".join(f"{i}. {statement[:150]}" for i, statement in enumerate(sql, 1))


def test_accepting_a_message_and_running_its_turn_cost_their_pinned_statements(
    user: Any, api_client: Client, statements: Statements
) -> None:
    session = session_create(owner=user, model="scripted", title="Pinned")
    scripted_push(session.id, {"text": "first answer", "chunk": 100})
    assert turn(message(api_client, session, "first")) == "completed"  # the turn before
    scripted_push(session.id, {"text": "second answer", "chunk": 100})
    statements.clear()

    run_id = message(api_client, session, "second")
    assert len(statements.web) == WEB, numbered(statements.web)
    assert turn(run_id) == "completed"
    assert len(statements.worker) == WORKER, numbered(statements.worker)

    run = Run.objects.get(pk=run_id)
    assert run.status == "completed" and run.batch_size == 1
    assert AgentSession.objects.get(pk=session.pk).state == "idle"
