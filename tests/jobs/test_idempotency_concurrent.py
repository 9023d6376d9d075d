from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from django.test import Client

from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_twenty_concurrent_starts_with_one_key_create_one_job(api_client: Any) -> None:
    token = api_client.raw_token
    barrier = threading.Barrier(20)
    responses: list[Any] = []
    lock = threading.Lock()

    def post() -> None:
        client = Client(headers={"Authorization": f"Bearer {token}"})
        try:
            barrier.wait()
            response = client.post(
                "/api/jobs",
                {"tool": "noop", "args": {}},
                content_type="application/json",
                headers={"Idempotency-Key": "one-key"},
            )
            with lock:
                responses.append(response)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [r.status_code for r in responses] == [202] * 20
    assert len({r.json()["job_id"] for r in responses}) == 1
    assert Job.objects.count() == 1
