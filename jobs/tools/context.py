"""The ToolContexts: what a running tool reports through, in each place a tool runs.

``ToolContext`` (in ``jobs.registry``) is what a tool may use. Three contexts
implement it, all on ``BaseToolContext`` (ids, deadline, logger, the stop switch,
the session's model):

- ``JobToolContext``: a job in a work horse; publishes progress (throttled)
  and partial results through ``jobs.lifecycle``, and is told to stop by the
  job's heartbeat thread (``jobs.heartbeat``).
- ``InlineToolContext``: a blocking tool run inline; nothing to publish,
  stopped only by its deadline.
- ``LocalToolContext``: a tool run from a shell or a test; records what the
  tool reports and has a ``cancel()`` switch that plays a cancel request.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.utils import timezone

from agentsite.core.database import DATABASE_AWAY, through_database_outage
from jobs import hooks, lifecycle
from jobs.hooks import TextModel
from jobs.lifecycle import JobTransitionError
from jobs.models import Job
from jobs.registry import ToolCancelled

PROGRESS_INTERVAL_S = 0.5


class StopReason:
    CANCEL = "cancel"
    DEADLINE = "deadline"


class BaseToolContext:
    def __init__(
        self,
        *,
        job_id: str | None = None,
        owner_id: int | None = None,
        session_id: str | None = None,
        deadline: datetime | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.job_id = job_id
        self.owner_id = owner_id
        self.session_id = session_id
        self.deadline = deadline
        self.logger = logger or logging.getLogger("jobs.tools")
        self.stop_reason: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def progress(self, fraction: float | None, message: str = "") -> None:
        return None

    def partial(self, item: Any) -> int:
        raise NotImplementedError

    @property
    def cancelled(self) -> bool:
        """Told to stop, or past the deadline."""
        if self._stop.is_set():
            return True
        return self.deadline is not None and timezone.now() >= self.deadline

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise ToolCancelled(self.stop_reason or StopReason.DEADLINE)

    def model(self) -> TextModel | None:
        """The session's model for tools that write prose; None without one (or offline)."""
        return hooks.session_model(session_id=self.session_id)


def deadline_after(timeout_s: float | None) -> datetime | None:
    return timezone.now() + timedelta(seconds=timeout_s) if timeout_s is not None else None


class LocalToolContext(BaseToolContext):
    """A tool outside the job system: records progress and partial results, ``cancel()``."""

    def __init__(
        self,
        *,
        owner_id: int | None = None,
        session_id: str | None = None,
        job_id: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(
            job_id=job_id,
            owner_id=owner_id,
            session_id=session_id,
            deadline=deadline_after(timeout_s),
        )
        self.progress_updates: list[tuple[float | None, str]] = []
        self.partials: list[Any] = []

    def progress(self, fraction: float | None, message: str = "") -> None:
        with self._lock:
            self.progress_updates.append((fraction, message))

    def partial(self, item: Any) -> int:
        with self._lock:
            self.partials.append(item)
            return len(self.partials) - 1

    def cancel(self) -> None:
        """What a cancel request does to a running job: ``cancelled`` turns true."""
        self.stop_reason = StopReason.CANCEL
        self._stop.set()

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise ToolCancelled()


class InlineToolContext(BaseToolContext):
    """A blocking tool run inline: nothing to publish, stopped only by its deadline."""

    def __init__(
        self, *, owner_id: int | None, session_id: str | None, timeout_s: float | None
    ) -> None:
        super().__init__(
            owner_id=owner_id, session_id=session_id, deadline=deadline_after(timeout_s or None)
        )
        self.items: list[Any] = []

    def partial(self, item: Any) -> int:
        self.items.append(item)
        return len(self.items) - 1


class JobToolContext(BaseToolContext):
    """A job running in a work horse: publishes what the tool reports, told when to stop.

    Only the job's heartbeat thread (``jobs.heartbeat``) signals a stop; the tool
    sees ``cancelled`` then, not by reading the clock itself, so that the runner
    can tell a deadline from a cancel request by what it signalled.
    """

    def __init__(self, job: Job) -> None:
        super().__init__(
            job_id=job.id,
            owner_id=job.owner_id,
            session_id=job.session_id,
            # The job's deadline is on the database's clock; the horse keeps it on its own.
            deadline=deadline_after(job.timeout_s) if job.deadline is not None else None,
            logger=logging.getLogger(f"jobs.tools.{job.tool}"),
        )
        self._job_id = job.id
        # A job starts once (queued → running), so its partial results begin at 0.
        self._next_index = 0
        # Partial results are numbered and written one at a time under a lock of their
        # own: one may wait out a database outage, and the heartbeat thread, which takes
        # ``_lock`` to flush progress, must not wait with it.
        self._partial_lock = threading.Lock()
        self._last_progress_at = 0.0
        self._pending_progress: tuple[float | None, str] | None = None

    # --- what tools call ---------------------------------------------------------

    def progress(self, fraction: float | None, message: str = "") -> None:
        with self._lock:
            self._pending_progress = (fraction, message)
            due = time.monotonic() - self._last_progress_at >= PROGRESS_INTERVAL_S
        if due:
            self.progress_flush()

    def partial(self, item: Any) -> int:
        json.dumps(item)  # refuse what the database could not store, in the tool's own frame
        with self._partial_lock:
            index = self._next_index
            try:
                # A database restart costs the tool a wait, not the job.
                through_database_outage(
                    lambda: lifecycle.job_partial(job_id=self._job_id, index=index, item=item),
                    what=f"partial result {index} of job {self.job_id}",
                )
            except JobTransitionError:
                # The job already ended elsewhere (stopped, swept): nothing more to add.
                self.signal_stop(StopReason.CANCEL)
                raise ToolCancelled(self.stop_reason) from None
            self._next_index += 1
        return index

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def check_cancelled(self) -> None:
        if self._stop.is_set():
            raise ToolCancelled(self.stop_reason or StopReason.CANCEL)

    # --- what the runner and the heartbeat call ----------------------------------

    def progress_flush(self) -> None:
        with self._lock:
            pending = self._pending_progress
            self._pending_progress = None
            if pending is None:
                return
            self._last_progress_at = time.monotonic()
        try:
            lifecycle.job_progress(job_id=self._job_id, fraction=pending[0], message=pending[1])
        except JobTransitionError:
            pass  # the job already ended; late progress is dropped
        except DATABASE_AWAY:
            # The database is away for a moment: the next flush writes it, unless newer
            # progress came meanwhile. Never the tool's problem.
            connections.close_all()
            with self._lock:
                if self._pending_progress is None:
                    self._pending_progress = pending

    def signal_stop(self, reason: str) -> bool:
        """Tell the tool to stop; True the first time."""
        with self._lock:
            if self._stop.is_set():
                return False
            self.stop_reason = reason
            self._stop.set()
            return True
