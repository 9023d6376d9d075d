from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from jobs import lifecycle
from jobs.groups import owner_jobs_group
from jobs.live import direct_publish_prefix
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_owner_group_receives_every_transition(user: Any) -> None:
    assert direct_publish_prefix() is not None  # the fast path is the one under test
    # database_sync_to_async closes its connection afterwards, as consumers do. The row
    # counts as handed to RQ (enqueued_at), so the suite's scheduler does not release it
    # to a worker while this test drives its transitions by hand.
    job = await database_sync_to_async(Job.objects.create)(
        owner=user, tool="sleepy", args={}, timeout_s=30, enqueued_at=timezone.now()
    )
    layer = get_channel_layer()
    owner_channel = await layer.new_channel()
    await layer.group_add(owner_jobs_group(user.pk), owner_channel)
    await asyncio.sleep(0.1)  # the subscription is live

    await database_sync_to_async(lifecycle.job_start)(job_id=job.id)
    await database_sync_to_async(lifecycle.job_partial)(job_id=job.id, index=0, item={"n": 1})
    await database_sync_to_async(lifecycle.job_succeed)(job_id=job.id, result={"summary": "ok"})

    received = [await asyncio.wait_for(layer.receive(owner_channel), 5) for _ in range(2)]
    assert [(m["type"], m["event"]) for m in received] == [
        ("job.update", "job_started"),
        ("job.update", "job_completed"),
    ]
    assert received[1]["job"]["status"] == "done"
    # A partial result is read from its rows (prompted by partial_count), not published.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(owner_channel), 0.5)
    await layer.flush()
