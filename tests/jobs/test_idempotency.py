from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.services import idempotency_keys_expire
from tests.jobs.factories import start_job

pytestmark = pytest.mark.django_db


def test_the_same_request_with_the_same_key_returns_the_same_job(api_client: Any) -> None:
    first = start_job(api_client, "sleepy", {"seconds": 1}, key="same")
    again = start_job(api_client, "sleepy", {"seconds": 1}, key="same")

    assert first.status_code == again.status_code == 202
    assert first.json() == {"job_id": first.json()["job_id"], "status": "queued"}
    assert again.json()["job_id"] == first.json()["job_id"]
    assert again["Location"] == f"/api/jobs/{first.json()['job_id']}"
    assert Job.objects.count() == 1


def test_the_same_key_with_another_request_is_refused(api_client: Any) -> None:
    first = start_job(api_client, "sleepy", {"seconds": 1}, key="same")
    other = start_job(api_client, "sleepy", {"seconds": 2}, key="same")

    assert other.status_code == 422
    error = other.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert error["details"] == {"job_id": first.json()["job_id"]}


def test_keys_belong_to_their_owner(api_client: Any, other_api_client: Any) -> None:
    mine = start_job(api_client, "sleepy", key="shared-name").json()["job_id"]
    theirs = start_job(other_api_client, "sleepy", {"seconds": 3}, key="shared-name")
    assert theirs.status_code == 202
    assert theirs.json()["job_id"] != mine


def test_an_expired_key_starts_a_new_job(api_client: Any) -> None:
    old = start_job(api_client, "sleepy", key="k").json()["job_id"]
    Job.objects.filter(id=old).update(idempotency_expires_at=timezone.now() - timedelta(seconds=1))

    new = start_job(api_client, "sleepy", {"seconds": 2}, key="k")

    assert new.status_code == 202
    assert new.json()["job_id"] != old


def test_the_sweep_releases_expired_keys(api_client: Any) -> None:
    old = start_job(api_client, "sleepy", key="k").json()["job_id"]
    Job.objects.filter(id=old).update(idempotency_expires_at=timezone.now() - timedelta(seconds=1))

    assert idempotency_keys_expire() == 1
    assert Job.objects.get(id=old).idempotency_key is None
