from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from jobs.models import Job
from tests.jobs.factories import start_job, started_job_id

pytestmark = pytest.mark.django_db


def error_of(response: Any) -> dict[str, Any]:
    return dict(response.json()["error"])


def test_starting_without_an_idempotency_key_is_refused(api_client: Any) -> None:
    response = api_client.post(
        "/api/jobs", {"tool": "noop", "args": {}}, content_type="application/json"
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == "idempotency_key_required"
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"tool": "no_such_tool"}, 422, "unknown_tool"),
        ({"tool": "clock"}, 422, "tool_is_blocking"),
        ({"tool": "sleepy", "args": {"seconds": "long"}}, 422, "invalid_arguments"),
        ({"tool": "sleepy", "args": {"seconds": -1}}, 422, "invalid_arguments"),
        ({"tool": "sleepy", "timeout_s": 0}, 422, "invalid_timeout"),
        ({"tool": "sleepy", "timeout_s": 121}, 422, "invalid_timeout"),
        ({"tool": "sleepy", "depends_on": ["job_doesnotexist"]}, 422, "bad_dependency"),
        ({"tool": "sleepy", "depends_on": ["not a job id"]}, 422, "bad_dependency"),
        ({"tool": "sleepy", "session_id": "ses_nope"}, 422, "unknown_session"),
        ({"args": {}}, 422, "invalid_request"),
        ({"tool": "sleepy", "args": [1, 2]}, 422, "invalid_request"),
    ],
)
def test_a_bad_start_request_gets_a_clear_error(
    api_client: Any, body: dict[str, Any], status: int, code: str
) -> None:
    response = api_client.post(
        "/api/jobs", body, content_type="application/json", headers={"Idempotency-Key": "k"}
    )
    assert response.status_code == status, response.content
    error = error_of(response)
    assert error["code"] == code
    assert error["message"]
    assert not Job.objects.exists()


def test_a_body_that_is_not_json_is_refused(api_client: Any) -> None:
    response = api_client.post(
        "/api/jobs", "{not json", content_type="application/json", headers={"Idempotency-Key": "k"}
    )
    assert response.status_code in {400, 422}
    assert error_of(response)["code"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_too_large_body_is_refused_with_413(api_client: Any) -> None:
    response = start_job(api_client, "sleepy", {"padding": "x" * 2000})
    assert response.status_code == 413
    assert error_of(response)["code"] == "too_large"


@override_settings(AGENTSITE_ALLOWED_PRIVATE_HOSTS=[])
@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/hook", "http://[1.1.1.1]/", "http://100.64.0.1/"]
)
def test_a_callback_to_a_malformed_or_internal_address_is_refused(
    api_client: Any, url: str
) -> None:
    response = start_job(api_client, "noop", callback_url=url)
    assert response.status_code == 422
    assert error_of(response)["code"] == "callback_url_refused"


def test_a_dependency_owned_by_someone_else_is_refused(
    api_client: Any, other_api_client: Any
) -> None:
    theirs = started_job_id(other_api_client, "noop")
    response = start_job(api_client, "noop", depends_on=[theirs])
    assert response.status_code == 422
    assert error_of(response)["code"] == "bad_dependency"
    assert error_of(response)["details"] == {"job_ids": [theirs]}


def test_the_result_of_an_unfinished_job_is_not_ready(api_client: Any) -> None:
    job_id = started_job_id(api_client, "sleepy")
    response = api_client.get(f"/api/jobs/{job_id}/result")
    assert response.status_code == 409
    assert error_of(response)["code"] == "not_finished"


def test_a_negative_cursor_is_refused(api_client: Any) -> None:
    job_id = started_job_id(api_client, "sleepy")
    response = api_client.get(f"/api/jobs/{job_id}/result?cursor=-1")
    assert response.status_code == 422
    assert error_of(response)["code"] == "invalid_request"


def test_an_unknown_status_filter_is_refused(api_client: Any) -> None:
    response = api_client.get("/api/jobs?status=sleeping")
    assert response.status_code == 422
    assert error_of(response)["code"] == "invalid_request"
