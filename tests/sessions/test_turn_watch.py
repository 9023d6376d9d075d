"""The watcher of a worker's turns: stop requests reach a turn through Redis at once, and
through the database at its heartbeat, which is all it asks the database.

A turn streamed alone paid a query every ``CANCEL_POLL_S`` (0.2 s) for its whole length,
for a stop that almost never comes: at one user, a tenth of the turn worker's CPU per
turn. The request now leaves a key in Redis (``sessions.runs.run_request_cancel``) that
the watcher reads on its loop; the database is asked once a heartbeat, which also finds
runs stopped by what writes the database alone (the reaper, a request whose signal
Redis lost).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.signals import connection_created
from django.utils import timezone

from jobs.groups import cancel_key
from jobs.live import redis_connection
from sessions import runs
from sessions.llm.scripted import scripted_push
from sessions.models import Event, Run
from sessions.runs import HEARTBEAT_EVERY_S, run_request_cancel
from sessions.runtime import CANCEL_POLL_S, run_execute
from sessions.services import message_post
from tests.conftest import wait_until
from tests.sessions.factories import make_session

pytestmark = pytest.mark.django_db(transaction=True)

# 100 pieces 0.03 s apart: a turn of about 3 s, longer than a heartbeat.
LONG = {"text": "".join(f"word{i} " for i in range(300)), "chunk": 18, "delay_s": 0.03}
# 40 pieces 0.03 s apart: about 1.2 s, shorter than a heartbeat.
SHORT = {"text": "".join(f"word{i} " for i in range(120)), "chunk": 18, "delay_s": 0.03}


@pytest.fixture(autouse=True)
def runs_kept_from_workers(monkeypatch: Any) -> None:
    """The test runs its turns itself (``run_execute``: a runtime with its watcher)."""
    monkeypatch.setattr(runs, "run_enqueue", lambda run_id, **kwargs: None)


class StopLooks:
    """The watcher's reads of which runs must stop, counted in every thread."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        # ``runs_to_stop``: the id, status and stop request of the given runs.
        if '"status", ' in sql and '"cancel_requested_at" FROM' in sql:
            with self.lock:
                self.count += 1
        return execute(sql, params, many, context)

    def watch(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


@pytest.fixture
def stop_looks() -> Iterator[StopLooks]:
    counter = StopLooks()
    connection_created.connect(counter.watch)  # the runtime's pool opens its own
    try:
        with connection.execute_wrapper(counter):
            yield counter
    finally:
        connection_created.disconnect(counter.watch)


def turn_in_thread(run_id: str) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def main() -> None:
        began = time.monotonic()
        outcome["status"] = run_execute(run_id=run_id)
        outcome["took_s"] = time.monotonic() - began

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread, outcome


def streaming(run: Run) -> bool:
    return Event.objects.filter(run=run, kind="assistant_delta").exists()


def test_a_turn_asks_the_database_which_runs_stop_once_a_heartbeat_not_every_poll(
    user: Any, stop_looks: StopLooks
) -> None:
    session = make_session(user)
    scripted_push(session.id, SHORT)
    _, run = message_post(session=session, text="talk a while")
    thread, outcome = turn_in_thread(run.id)
    thread.join(30)
    assert outcome["status"] == "completed"
    polls = outcome["took_s"] / CANCEL_POLL_S
    assert polls >= 4, outcome  # long enough that a look every poll would show
    assert stop_looks.count <= outcome["took_s"] / HEARTBEAT_EVERY_S + 1, (
        stop_looks.count,
        outcome,
    )


def test_a_stop_signalled_through_redis_alone_interrupts_the_turn(user: Any) -> None:
    session = make_session(user)
    scripted_push(session.id, LONG)
    _, run = message_post(session=session, text="talk for a long time")
    thread, outcome = turn_in_thread(run.id)
    wait_until(lambda: streaming(run))
    # The key alone, as the request leaves it: the database does not say to stop.
    redis_connection().set(cancel_key(run.id), "1", ex=60)
    thread.join(30)
    assert outcome["status"] == Run.Status.CANCELLED
    kept = Event.objects.get(run=run, kind="assistant_message").payload
    assert kept["interrupted"] is True and kept["text"] != LONG["text"]


def test_a_stop_the_database_alone_holds_reaches_the_turn_at_its_heartbeat(
    user: Any,
) -> None:
    """Redis lost the signal (flushed, failed over): the request in the database stops the
    turn all the same."""
    session = make_session(user)
    scripted_push(session.id, LONG)
    _, run = message_post(session=session, text="talk for a long time")
    thread, outcome = turn_in_thread(run.id)
    wait_until(lambda: streaming(run))
    Run.objects.filter(pk=run.id).update(cancel_requested_at=timezone.now())
    thread.join(30)
    assert outcome["status"] == Run.Status.CANCELLED
    assert Event.objects.get(run=run, kind="assistant_message").payload["interrupted"] is True


def test_a_cancel_request_leaves_the_signal_the_watcher_reads(user: Any) -> None:
    session = make_session(user)
    _, run = message_post(session=session, text="one")
    assert runs.run_start(run_id=run.id) is not None
    redis_connection().delete(cancel_key(run.id))
    assert run_request_cancel(run_id=run.id) == "cancelling"
    assert redis_connection().exists(cancel_key(run.id))
