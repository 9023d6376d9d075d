from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from jobs.admin import CappedCountPaginator
from jobs.models import Job
from tests.jobs.factories import started_job_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_for(user: Any) -> Client:
    user.is_staff = user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def test_the_job_list_and_page_show_progress_arguments_and_events(
    api_client: Any, admin_client_for: Client
) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 7})

    listing = admin_client_for.get("/admin/jobs/job/?q=sleepy&status__exact=queued")
    # Quoted as the admin quotes its own links: an id that begins "job_25" (or _22, _23,
    # _24, _26, _40: one in 216) reads as an escape in an unquoted path, and is not found.
    page = admin_client_for.get(reverse("admin:jobs_job_change", args=[quote(job_id)]))

    assert listing.status_code == 200 and job_id in listing.content.decode()
    assert page.status_code == 200
    html = page.content.decode()
    assert "&quot;seconds&quot;: 7.0" in html
    assert "job_queued" in html


def test_the_cancel_action_goes_through_the_lifecycle(
    api_client: Any, admin_client_for: Client
) -> None:
    job_id = started_job_id(api_client, "sleepy")

    response = admin_client_for.post(
        "/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [job_id]}, follow=True
    )

    assert response.status_code == 200
    job = Job.objects.get(id=job_id)
    assert job.status == "cancelled"
    assert job.events.filter(event="job_cancelled").count() == 1


def test_retry_starts_a_new_job_with_the_same_request(
    api_client: Any, admin_client_for: Client
) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 3})
    api_client.delete(f"/api/jobs/{job_id}")

    admin_client_for.post(
        "/admin/jobs/job/", {"action": "retry_as_new_jobs", "_selected_action": [job_id]}
    )

    retry = Job.objects.exclude(id=job_id).get()
    assert (retry.tool, retry.args, retry.status) == (
        "sleepy",
        {"seconds": 3.0, "steps": 10},
        "queued",
    )


def test_the_list_counts_what_matches_up_to_its_cap_filtered_and_searched(
    api_client: Any, admin_client_for: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CappedCountPaginator, "CAP", 3)
    for tool in ("sleepy", "sleepy", "noop", "noop"):
        started_job_id(api_client, tool)

    def counted(query: str) -> int:
        response = admin_client_for.get(f"/admin/jobs/job/?{query}")
        assert response.status_code == 200
        return int(response.context["cl"].result_count)

    assert counted("") == 3  # the cap, of 4
    assert counted("tool=noop") == 2  # counted in the list's order, by its index
    assert counted("q=noop") == 2  # a search: counted without the order
    assert counted("q=o") == 3
