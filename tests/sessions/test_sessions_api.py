"""The sessions REST API: create, list, read, delete; errors in the common format."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.models import AgentSession

pytestmark = pytest.mark.django_db


def test_a_session_is_created_and_listed(api_client: Any) -> None:
    created = api_client.post(
        "/api/sessions",
        {"title": "Release prep", "model": "offline", "system_prompt": "Be brief."},
        content_type="application/json",
    )
    assert created.status_code == 201
    body = created.json()
    assert body["session_id"].startswith("ses_")
    assert (body["title"], body["model"], body["state"]) == ("Release prep", "offline", "idle")

    listed = api_client.get("/api/sessions").json()["sessions"]
    assert [s["session_id"] for s in listed] == [body["session_id"]]
    assert api_client.get(f"/api/sessions/{body['session_id']}").json() == body


def test_an_empty_body_creates_a_session_with_the_default_model(api_client: Any) -> None:
    response = api_client.post("/api/sessions", {}, content_type="application/json")
    assert response.status_code == 201 and response.json()["model"] == ""


def test_an_unknown_model_is_refused(api_client: Any) -> None:
    response = api_client.post("/api/sessions", {"model": "gpt-9"}, content_type="application/json")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_model"


def test_someone_elses_session_is_not_found(api_client: Any, other_api_client: Any) -> None:
    session_id = api_client.post("/api/sessions", {}, content_type="application/json").json()[
        "session_id"
    ]
    for response in (
        other_api_client.get(f"/api/sessions/{session_id}"),
        other_api_client.delete(f"/api/sessions/{session_id}"),
        other_api_client.get(f"/api/sessions/{session_id}/events"),
        other_api_client.post(
            f"/api/sessions/{session_id}/messages", {"text": "hi"}, content_type="application/json"
        ),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert other_api_client.get("/api/sessions").json() == {"sessions": []}


def test_requests_without_credentials_are_refused(client: Any) -> None:
    response = client.get("/api/sessions")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_an_empty_message_is_refused(api_client: Any) -> None:
    session_id = api_client.post("/api/sessions", {}, content_type="application/json").json()[
        "session_id"
    ]
    for body in ({"text": ""}, {"text": "   "}, {}):
        response = api_client.post(
            f"/api/sessions/{session_id}/messages", body, content_type="application/json"
        )
        assert response.status_code == 422
        assert "error" in response.json()


def test_a_deleted_session_is_gone(api_client: Any) -> None:
    session_id = api_client.post("/api/sessions", {}, content_type="application/json").json()[
        "session_id"
    ]
    deleted = api_client.delete(f"/api/sessions/{session_id}")
    assert deleted.status_code == 200
    assert deleted.json() == {
        "session_id": session_id,
        "deleted": True,
        "cancelled_runs": 0,
        "cancelled_jobs": 0,
    }
    assert api_client.get(f"/api/sessions/{session_id}").status_code == 404
    assert AgentSession.objects.get(pk=session_id).deleted_at is not None
