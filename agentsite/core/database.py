"""Riding out a database restart in long-lived processes.

A restart (or a failover) breaks every open connection, and Django opens a new
one only once the broken one is closed: a worker that does not close it fails
every query from then on. Web requests close theirs at the end of each request
and answer ``503 unavailable`` meanwhile (``agentsite.api``); workers wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connections

from agentsite.core import telemetry

log = logging.getLogger(__name__)

# What a lost or refused connection raises (a locked SQLite database, too: also transient).
DATABASE_AWAY = (OperationalError, InterfaceError)
BACKOFF_S = (0.5, 10.0)
T = TypeVar("T")


def through_database_outage(action: Callable[[], T], *, what: str) -> T:
    """``action()``, tried again on a new connection, with backoff, while the database is away.

    Only connection-level errors are retried, and only outside any transaction of
    the caller's: a connection lost inside one took the transaction with it (rolled
    back, or committed without a word back), and trying ``action`` again would run
    part of it a second time on a new connection. There the error goes up to the
    caller, who alone can start the whole transaction again.
    """
    wait = BACKOFF_S[0]
    while True:
        try:
            return action()
        except DATABASE_AWAY as exc:
            if in_callers_transaction():
                raise
            connections.close_all()
            telemetry.database_lost()  # the next connection is a reconnect
            log.warning("%s: database unavailable (%s); retrying in %.1fs", what, exc, wait)
            time.sleep(wait)
            wait = min(wait * 2, BACKOFF_S[1])


def in_callers_transaction() -> bool:
    """Some connection of this thread is inside an ``atomic`` block."""
    return any(connection.in_atomic_block for connection in connections.all(initialized_only=True))


def connections_keep_if_sound() -> None:
    """After a unit of work in a long-lived thread: keep this thread's connections for the
    next, except one on which an error occurred, which is closed (the next unit opens a
    new one). A database error may mean the connection is broken, or open on a server
    that can no longer write (a demoted primary): neither should serve the next unit.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        # As Django's own end-of-request check: a transaction left open also goes.
        left_open = connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]
        if connection.errors_occurred or left_open:
            connection.close()
