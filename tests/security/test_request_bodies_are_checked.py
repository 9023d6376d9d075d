"""Every JSON body of the REST API refuses NUL characters and fields it does not have (422).

PostgreSQL stores no NUL in text; a body that carried one would be a 500 there
and stored on SQLite. A field the body does not have is refused rather than
dropped, so a misspelt field is not mistaken for an accepted one.
"""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import ApiToken
from jobs.models import Job
from sessions.models import AgentSession, Event
from sessions.services import session_create

pytestmark = pytest.mark.django_db

VALID_BODIES: dict[str, dict[str, Any]] = {
    "/api/tokens": {"name": "laptop"},
    "/api/sessions": {"title": "notes"},
    "/api/sessions/{session_id}/messages": {"text": "hello"},
    "/api/jobs": {"tool": "sleepy", "args": {"seconds": 0}},
}


def post(api_client: Any, path: str, body: dict[str, Any]) -> Any:
    return api_client.post(
        path, body, content_type="application/json", headers={"Idempotency-Key": "k"}
    )


@pytest.fixture
def session_id(user: Any) -> str:
    return str(session_create(owner=user, title="mine").id)


def stored() -> dict[str, int]:
    return {
        "tokens": ApiToken.objects.count(),
        "sessions": AgentSession.objects.count(),
        "events": Event.objects.count(),
        "jobs": Job.objects.count(),
    }


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/tokens", {"name": "a\x00b"}),
        ("/api/sessions", {"title": "a\x00b"}),
        ("/api/sessions/{session_id}/messages", {"text": "a\x00b"}),
        ("/api/jobs", {"tool": "sleepy", "args": {"seconds": 0, "note\x00": "x"}}),
    ],
)
def test_a_nul_character_is_refused(
    api_client: Any, session_id: str, path: str, body: dict[str, Any]
) -> None:
    before = stored()

    response = post(api_client, path.format(session_id=session_id), body)

    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "NUL" in str(error["details"])
    assert stored() == before


@pytest.mark.parametrize("path", VALID_BODIES)
def test_an_unknown_field_is_refused(api_client: Any, session_id: str, path: str) -> None:
    before = stored()
    body = {**VALID_BODIES[path], "colour": "blue"}

    response = post(api_client, path.format(session_id=session_id), body)

    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"]
    assert any(
        detail["loc"][-1] == "colour" and detail["type"] == "extra_forbidden"
        for detail in error["details"]
    ), error
    assert stored() == before


def test_the_same_bodies_without_the_unknown_field_are_taken(
    api_client: Any, session_id: str
) -> None:
    for path, body in VALID_BODIES.items():
        response = post(api_client, path.format(session_id=session_id), body)
        assert response.status_code in (201, 202), (path, response.content)
