from __future__ import annotations

from typing import Any

import pytest

from tests.jobs.factories import started_job_id

pytestmark = pytest.mark.django_db


def test_jobs_are_listed_newest_first_in_pages(api_client: Any) -> None:
    ids = [started_job_id(api_client, "sleepy", {"seconds": i}) for i in range(5)]

    first = api_client.get("/api/jobs?limit=2").json()
    rest = api_client.get("/api/jobs?limit=10&offset=2").json()

    assert first["count"] == 5
    assert [j["job_id"] for j in first["items"] + rest["items"]] == ids[::-1]


def test_jobs_are_filtered_by_status_and_tool(api_client: Any) -> None:
    sleeping = started_job_id(api_client, "sleepy")
    cancelled = started_job_id(api_client, "noop")
    api_client.delete(f"/api/jobs/{cancelled}")

    by_status = api_client.get("/api/jobs?status=cancelled").json()["items"]
    by_tool = api_client.get("/api/jobs?tool=sleepy").json()["items"]

    assert [j["job_id"] for j in by_status] == [cancelled]
    assert [j["job_id"] for j in by_tool] == [sleeping]
    assert by_status[0]["error"] == {"code": "cancelled", "message": "Cancelled before it started."}
