"""Where an app above sessions learns that a session's log moved, so sessions never imports it.

An app registers a watcher at start-up (its ``AppConfig.ready()``); each event,
once its transaction has committed, is shown to every watcher in the committing
thread, after it is published. A watcher must be quick and must not raise
(it is shielded all the same: a failure is logged and costs the watcher only).
The A2A app watches for the events that may change a task's state, to notify
the clients that asked for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

LogWatcher = Callable[[str, str, Mapping[str, Any]], None]  # (session id, kind, payload)
_watchers: list[LogWatcher] = []


def log_watch(watcher: LogWatcher) -> None:
    if watcher not in _watchers:
        _watchers.append(watcher)


def log_moved(session_id: str, kind: str, payload: Mapping[str, Any]) -> None:
    for watcher in _watchers:
        try:
            watcher(session_id, kind, payload)
        except Exception:
            log.exception("a log watcher failed on %s of session %s", kind, session_id)
