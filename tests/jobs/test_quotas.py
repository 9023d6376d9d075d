"""A user at a job quota is refused with 429 and Retry-After; other users are not.

Before: nothing bounded one user's live jobs, so one user could fill the tool
workers' queue for everyone.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import UserQuota
from jobs.models import Job
from tests.jobs.factories import start_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def live_jobs_limit(settings: Any) -> int:
    settings.AGENTSITE_QUOTA_LIVE_JOBS = 2
    return 2


def assert_quota_exceeded(response: Any, quota: str) -> None:
    assert response.status_code == 429, response.content
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert error["details"]["quota"] == quota
    assert response["Retry-After"].isdigit() and int(response["Retry-After"]) >= 1


def test_a_user_at_the_live_jobs_limit_is_refused_and_another_user_is_not(
    api_client: Client, other_api_client: Client, user: Any, live_jobs_limit: int
) -> None:
    for _ in range(live_jobs_limit):
        assert start_job(api_client, "sleepy", {"seconds": 1}).status_code == 202

    refused = start_job(api_client, "sleepy", {"seconds": 1})

    assert_quota_exceeded(refused, "live_jobs")
    assert "limit of 2 jobs" in refused.json()["error"]["message"]
    assert Job.objects.filter(owner=user).count() == live_jobs_limit  # nothing was created
    assert start_job(other_api_client, "sleepy", {"seconds": 1}).status_code == 202


def test_a_repeat_of_an_accepted_request_is_answered_at_the_limit(
    api_client: Client, live_jobs_limit: int
) -> None:
    first = start_job(api_client, "sleepy", {"seconds": 1}, key="again")
    start_job(api_client, "sleepy", {"seconds": 2})

    repeat = start_job(api_client, "sleepy", {"seconds": 1}, key="again")

    assert repeat.status_code == 202
    assert repeat.json()["job_id"] == first.json()["job_id"]


def test_finished_jobs_do_not_count(api_client: Client, user: Any, live_jobs_limit: int) -> None:
    for _ in range(live_jobs_limit):
        start_job(api_client, "sleepy", {"seconds": 1})
    Job.objects.filter(owner=user).update(status=Job.Status.DONE)

    assert start_job(api_client, "sleepy", {"seconds": 1}).status_code == 202


def test_a_limit_of_zero_is_no_limit(api_client: Client, settings: Any) -> None:
    settings.AGENTSITE_QUOTA_LIVE_JOBS = 0
    for _ in range(3):
        assert start_job(api_client, "sleepy", {"seconds": 1}).status_code == 202


def test_the_admin_raises_one_users_limit(
    api_client: Client,
    other_api_client: Client,
    user: Any,
    make_user: Any,
    live_jobs_limit: int,
) -> None:
    admin = Client()
    admin.force_login(make_user("root", is_staff=True, is_superuser=True))
    saved = admin.post(
        "/admin/accounts/userquota/add/", {"user": user.pk, "live_jobs": 4, "live_turns": ""}
    )
    assert saved.status_code == 302, saved.content
    assert UserQuota.objects.get(user=user).live_turns is None  # blank: the default

    accepted = [start_job(api_client, "sleepy", {"seconds": 1}).status_code for _ in range(5)]
    assert accepted == [202, 202, 202, 202, 429]
    others = [start_job(other_api_client, "sleepy", {"seconds": 1}).status_code for _ in range(3)]
    assert others == [202, 202, 429]
