"""A worker asked to stop does not wait on RQ's command listener.

Each RQ worker listens for commands (stop a job, shut down) on a pub/sub
channel, in a thread. At its end RQ unsubscribes and then stops that thread,
and redis-py's ``stop()`` waits for it without a limit. A listener that has
already read the unsubscribe reply (it won the race with ``stop()``, as happens
on a busy machine) sleeps in ``get_message`` for up to RQ's 60 s: the worker
then took a minute more to exit, and process managers killed it first. The
state that race leaves is set up here on a real listener, then the worker's own
``unsubscribe`` runs.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from rq import Queue

from jobs.live import redis_connection
from jobs.worker import JobWorker
from sessions.worker import TurnWorker
from tests.conftest import wait_until

# Far below RQ's 60 s sleep, far above the second the worker allows itself.
PATIENCE_S = 15


def asleep_unsubscribed(listener: threading.Thread, worker: Any) -> bool:
    """The listener has handled its unsubscribe reply and sleeps until a subscription."""
    frame = sys._current_frames().get(listener.ident or 0)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return not worker.pubsub.subscribed and names[:1] == ["wait"] and "get_message" in names


@pytest.fixture(params=[JobWorker, TurnWorker], ids=lambda cls: cls.__name__)
def listening(request: pytest.FixtureRequest) -> tuple[Any, threading.Thread]:
    """A worker of each class, subscribed to its command channel on the real Redis."""
    connection = redis_connection()
    worker = request.param([Queue("listener-test", connection=connection)], connection=connection)
    worker.subscribe()
    listener = worker.pubsub_thread
    assert listener is not None and listener.is_alive()
    wait_until(lambda: worker.pubsub.subscribed, timeout=10)
    return worker, listener


def test_a_stopping_worker_does_not_wait_on_a_listener_that_saw_its_unsubscribe_first(
    listening: tuple[Any, threading.Thread],
) -> None:
    worker, listener = listening
    worker.pubsub.unsubscribe()  # the reply reaches the listener before the worker stops it
    wait_until(lambda: asleep_unsubscribed(listener, worker), timeout=10)

    stopping = threading.Thread(target=worker.unsubscribe, daemon=True)
    stopping.start()
    stopping.join(PATIENCE_S)
    assert not stopping.is_alive(), "unsubscribe waited on the sleeping listener"
    assert worker.pubsub.connection is None  # its connection went back to the pool


def test_a_stopping_worker_s_listener_ends_and_closes_its_connection(
    listening: tuple[Any, threading.Thread],
) -> None:
    worker, listener = listening
    worker.unsubscribe()

    wait_until(lambda: not listener.is_alive(), timeout=PATIENCE_S)
    assert worker.pubsub.connection is None
