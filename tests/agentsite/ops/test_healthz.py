from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agentsite.ops import health
from tests.conftest import Processes, wait_until


def staff_client(make_user: Any) -> Client:
    client = Client()
    client.force_login(make_user("operator", is_staff=True))
    return client


@pytest.mark.django_db(transaction=True)
def test_healthz_reports_every_part_up(
    rq_workers: Processes, rq_scheduler: Processes, make_user: Any
) -> None:
    client = staff_client(make_user)

    def healthy() -> dict[str, object] | None:
        response = client.get("/healthz")
        return response.json() if response.status_code == 200 else None

    body = wait_until(healthy, timeout=30)
    assert body["database"]["ok"] and body["redis"]["ok"] and body["scheduler"]["ok"]
    assert body["workers"]["turns"]["workers"] >= 1
    assert body["workers"]["tools"]["workers"] >= 1


@pytest.mark.django_db(transaction=True)
def test_healthz_is_503_when_a_queue_has_no_worker(
    rq_workers: Processes, monkeypatch: pytest.MonkeyPatch, make_user: Any
) -> None:
    monkeypatch.setattr(health, "WORKER_QUEUES", ("turns", "tools", "nobody-listens"))
    response = staff_client(make_user).get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "down"
    assert body["workers"]["nobody-listens"]["ok"] is False
    assert body["workers"]["nobody-listens"]["workers"] == 0
    assert body["workers"]["tools"]["ok"] is True
