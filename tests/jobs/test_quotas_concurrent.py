"""Concurrent starts by one user cannot get past its live-jobs quota between count and insert."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from django.test import Client

from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_twelve_concurrent_starts_at_a_limit_of_three_create_three_jobs(
    api_client: Any, user: Any, settings: Any
) -> None:
    settings.AGENTSITE_QUOTA_LIVE_JOBS = 3
    token = api_client.raw_token
    barrier = threading.Barrier(12)
    statuses: list[int] = []
    lock = threading.Lock()

    def post(n: int) -> None:
        client = Client(headers={"Authorization": f"Bearer {token}"})
        try:
            barrier.wait()
            response = client.post(
                "/api/jobs",
                {"tool": "sleepy", "args": {"seconds": 1}},
                content_type="application/json",
                headers={"Idempotency-Key": f"key-{n}"},
            )
            with lock:
                statuses.append(response.status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [202] * 3 + [429] * 9
    assert Job.objects.filter(owner=user).count() == 3
