"""Where an app above sessions learns that a session's log moved, so sessions never imports it.

An app registers a watcher at start-up (its ``AppConfig.ready()``) and says which
sessions it watches (``log_watch_settle``); each event of a watched session, once
its transaction has committed, is shown to every watcher in the committing
thread, after it is published. A watcher must be quick and must not raise (it is
shielded all the same: a failure is logged and costs the watcher only). The A2A
app watches the sessions of tasks with push notifications, for the events that may
change a task's state, to notify the clients that asked for it.

Whether a session is watched is its row's ``watched``, which the statement giving
an event its seq reads back (``sessions.events``): an event of a session nobody
watches costs no query. That statement waits for the session's row lock, so an
event whose seq comes after a watch began committing is shown to the watchers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from django.db import transaction

from sessions.models import AgentSession

log = logging.getLogger(__name__)

LogWatcher = Callable[[str, str, Mapping[str, Any]], None]  # (session id, kind, payload)
_watchers: list[LogWatcher] = []


def log_watch(watcher: LogWatcher) -> None:
    if watcher not in _watchers:
        _watchers.append(watcher)


def log_watch_settle(session_id: str, *, watched: Callable[[], bool]) -> None:
    """Watch the session's log from its next event on, or stop: as ``watched()`` says,
    asked with the session's row locked.

    Call it in the transaction that changes what ``watched`` answers, after the change:
    two such transactions on one session queue on the row, and the second asks once
    the first has committed, so neither leaves the session unwatched while it should
    be watched.
    """
    with transaction.atomic():
        rows = AgentSession.objects.select_for_update().filter(pk=session_id)
        was = rows.values_list("watched", flat=True).first()
        if was is None:
            return
        now = watched()
        if now != was:
            AgentSession.objects.filter(pk=session_id).update(watched=now)


def log_moved(session_id: str, kind: str, payload: Mapping[str, Any]) -> None:
    """Show a committed event of a watched session to every watcher."""
    for watcher in _watchers:
        try:
            watcher(session_id, kind, payload)
        except Exception:
            log.exception("a log watcher failed on %s of session %s", kind, session_id)
