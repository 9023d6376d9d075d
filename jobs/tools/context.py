"""An in-process ToolContext: runs a tool outside the job system.

Used to call a tool from a shell or a test. It records what the tool reports
instead of publishing it, and has a switch that plays the part of a cancel
request. The job runner's context is the one that publishes.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobs.registry import ToolCancelled


class LocalToolContext:
    def __init__(
        self,
        *,
        owner_id: int | None = None,
        session_id: str | None = None,
        job_id: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.job_id = job_id
        self.owner_id = owner_id
        self.session_id = session_id
        self.deadline: datetime | None = (
            timezone.now() + timedelta(seconds=timeout_s) if timeout_s is not None else None
        )
        self.logger = logging.getLogger("jobs.tools")
        self.progress_updates: list[tuple[float | None, str]] = []
        self.partials: list[Any] = []
        self._cancel = threading.Event()
        self._lock = threading.Lock()

    def progress(self, fraction: float | None, message: str = "") -> None:
        with self._lock:
            self.progress_updates.append((fraction, message))

    def partial(self, item: Any) -> int:
        with self._lock:
            self.partials.append(item)
            return len(self.partials) - 1

    def cancel(self) -> None:
        """What a cancel request does to a running job: ``cancelled`` turns true."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        if self._cancel.is_set():
            return True
        return self.deadline is not None and timezone.now() >= self.deadline

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise ToolCancelled()
