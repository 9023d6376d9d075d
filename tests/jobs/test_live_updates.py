from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from jobs import lifecycle
from jobs.groups import job_group, owner_jobs_group
from jobs.live import direct_publish_prefix
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


async def test_job_and_owner_groups_receive_every_transition_and_partial(user: Any) -> None:
    assert direct_publish_prefix() is not None  # the fast path is the one under test
    # database_sync_to_async closes its connection afterwards, as consumers do. The row
    # counts as handed to RQ (enqueued_at), so the suite's scheduler does not release it
    # to a worker while this test drives its transitions by hand.
    job = await database_sync_to_async(Job.objects.create)(
        owner=user, tool="sleepy", args={}, timeout_s=30, enqueued_at=timezone.now()
    )
    layer = get_channel_layer()
    job_channel = await layer.new_channel()
    owner_channel = await layer.new_channel()
    await layer.group_add(job_group(job.id), job_channel)
    await layer.group_add(owner_jobs_group(user.pk), owner_channel)
    await asyncio.sleep(0.1)  # the subscriptions are live

    await database_sync_to_async(lifecycle.job_start)(job_id=job.id)
    await database_sync_to_async(lifecycle.job_partial)(job_id=job.id, index=0, item={"n": 1})
    await database_sync_to_async(lifecycle.job_succeed)(job_id=job.id, result={"summary": "ok"})

    received = [await asyncio.wait_for(layer.receive(job_channel), 5) for _ in range(3)]
    assert [(m["type"], m.get("event")) for m in received] == [
        ("job.update", "job_started"),
        ("job.partial", None),
        ("job.update", "job_completed"),
    ]
    assert received[1] == {"type": "job.partial", "job_id": job.id, "index": 0, "item": {"n": 1}}
    assert received[2]["job"]["status"] == "done"
    owner_view = [await asyncio.wait_for(layer.receive(owner_channel), 5) for _ in range(2)]
    assert [m["event"] for m in owner_view] == ["job_started", "job_completed"]
    await layer.flush()
