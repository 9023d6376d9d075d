from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings
from django.utils import timezone

from agentsite.core.redis_connections import settings_channel_layer_host
from jobs import lifecycle, live
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


def test_the_direct_publish_path_follows_the_channel_layer_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The prefix is read once, not at every event, and read again when the settings it
    comes from change (as a test or a reloaded configuration changes them)."""
    prefix = direct_publish_prefix()
    assert prefix is not None
    looked: list[object] = []
    real = settings_channel_layer_host

    def counted() -> dict[str, Any]:
        looked.append(1)
        return real()

    monkeypatch.setattr(live, "settings_channel_layer_host", counted)  # as live calls it
    assert {direct_publish_prefix() for _ in range(100)} == {prefix}
    assert looked == []  # not once an event
    monkeypatch.undo()
    with override_settings(
        CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    ):
        assert direct_publish_prefix() is None  # another layer: published through it
    assert direct_publish_prefix() == prefix
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):  # never connected to
        assert direct_publish_prefix() is None  # the layer's Redis is not ours any more
    assert direct_publish_prefix() == prefix
