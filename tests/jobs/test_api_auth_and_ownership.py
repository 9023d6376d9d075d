from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.jobs.factories import started_job_id

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer ast_wrong"}])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/jobs"),
        ("get", "/api/jobs"),
        ("get", "/api/jobs/job_abc"),
        ("get", "/api/jobs/job_abc/result"),
        ("delete", "/api/jobs/job_abc"),
        ("get", "/api/webhook-secret"),
    ],
)
def test_no_or_a_bad_token_is_401(method: str, path: str, headers: dict[str, str]) -> None:
    response = getattr(Client(headers=headers), method)(path)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("suffix", ["", "/result", "/result?cursor=0"])
def test_another_users_job_is_404(api_client: Any, other_api_client: Any, suffix: str) -> None:
    job_id = started_job_id(api_client, "sleepy")
    response = other_api_client.get(f"/api/jobs/{job_id}{suffix}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_another_user_cannot_cancel_a_job(api_client: Any, other_api_client: Any) -> None:
    job_id = started_job_id(api_client, "sleepy")
    assert other_api_client.delete(f"/api/jobs/{job_id}").status_code == 404
    assert api_client.get(f"/api/jobs/{job_id}").json()["status"] == "queued"


@pytest.mark.parametrize("job_id", ["job_unknown00000000", "not-a-job", "JOB_ABC!", "x" * 300])
def test_unknown_and_malformed_ids_are_404(api_client: Any, job_id: str) -> None:
    for method, suffix in [("get", ""), ("get", "/result"), ("delete", "")]:
        response = getattr(api_client, method)(f"/api/jobs/{job_id}{suffix}")
        assert response.status_code == 404, (method, suffix, response.content)
        assert response.json()["error"]["code"] == "not_found"


def test_another_users_jobs_are_not_listed(api_client: Any, other_api_client: Any) -> None:
    started_job_id(api_client, "sleepy")
    assert other_api_client.get("/api/jobs").json()["items"] == []
