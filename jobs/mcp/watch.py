"""Waiting for jobs to change, for pushed task notifications and ``tasks/result``.

Job transitions publish ``job.update`` on the owner's channel-layer group; a
watcher uses those messages only as wake-ups and reads the rows again, because
the database is the truth and a pub/sub message may be lost (Redis restarted).
A periodic re-read covers that case.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import AbstractBaseUser

from jobs.groups import owner_jobs_group
from jobs.mcp import calls, mapping
from jobs.models import Job

logger = logging.getLogger(__name__)

RECHECK_S = 1.0


class OwnerJobsWakeups:
    """A channel-layer subscription to one owner's job updates, used as a doorbell."""

    def __init__(self, owner_id: int) -> None:
        self.owner_id = owner_id
        self.layer: Any = None
        self.channel = ""
        self.group = ""

    async def __aenter__(self) -> OwnerJobsWakeups:
        try:
            self.layer = get_channel_layer()
            if self.layer is not None:
                self.group = owner_jobs_group(self.owner_id)
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(self.group, self.channel)
        except Exception:  # without wake-ups, the periodic re-read still sees every change
            logger.warning("job updates unavailable on the channel layer", exc_info=True)
            self.layer = None
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.layer is not None and self.channel:
            try:
                await self.layer.group_discard(self.group, self.channel)
            except Exception:
                logger.debug("group_discard failed", exc_info=True)

    async def wait(self, timeout: float) -> None:
        """Return on the next job update for this owner, or after ``timeout`` seconds."""
        if self.layer is None:
            await asyncio.sleep(timeout)
            return
        try:
            await asyncio.wait_for(self.layer.receive(self.channel), timeout)
        except TimeoutError:
            pass


async def task_changes(*, owner: AbstractBaseUser, task_ids: list[str]) -> AsyncIterator[Job]:
    """Yield each task's job whenever its status or progress changes, until all are terminal.

    The first state of every task is yielded at once.
    """
    seen: dict[str, tuple[str, str, float | None]] = {}
    async with OwnerJobsWakeups(owner.pk) as wakeups:
        while True:
            jobs = await database_sync_to_async(calls.jobs_by_id)(owner=owner, task_ids=task_ids)
            for task_id in task_ids:
                job = jobs.get(task_id)
                if job is None:
                    continue
                state = mapping.observed_state(job)
                if seen.get(task_id) != state:
                    seen[task_id] = state
                    yield job
            if all(job.is_terminal for job in jobs.values()):
                return
            await wakeups.wait(RECHECK_S)


async def task_finished(*, owner: AbstractBaseUser, task_id: str) -> Job:
    """The job once it is terminal (waits as long as it takes)."""
    job: Job | None = None
    async for change in task_changes(owner=owner, task_ids=[task_id]):
        job = change
    if job is None:
        job = await database_sync_to_async(calls.task_job)(owner=owner, task_id=task_id)
    return job
