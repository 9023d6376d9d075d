"""A session is titled from its first message; its owner may rename it, and that title stays."""

from __future__ import annotations

from typing import Any

import pytest

from responses.payloads import ResponseCreate
from responses.services import response_create
from sessions.models import AgentSession
from sessions.titles import AUTO_TITLE_CHARS, title_from_text

pytestmark = pytest.mark.django_db


def new_session(api_client: Any, **fields: Any) -> str:
    created = api_client.post("/api/sessions", fields, content_type="application/json")
    assert created.status_code == 201, created.content
    return str(created.json()["session_id"])


def say(api_client: Any, session_id: str, text: str) -> None:
    response = api_client.post(
        f"/api/sessions/{session_id}/messages", {"text": text}, content_type="application/json"
    )
    assert response.status_code == 202, response.content


def rename(api_client: Any, session_id: str, title: Any) -> Any:
    return api_client.patch(
        f"/api/sessions/{session_id}", {"title": title}, content_type="application/json"
    )


def title_of(api_client: Any, session_id: str) -> str:
    return str(api_client.get(f"/api/sessions/{session_id}").json()["title"])


@pytest.mark.parametrize(
    ("text", "title"),
    [
        (
            "Please run the tests in the workspace and write a report on them.",
            "Please run the tests in the",
        ),
        ("  crawl\n\n example.com \t now ", "crawl example.com now"),
        ("hi", "hi"),
        (
            "Summarise internationalisation considerations for multilingual storefronts quickly",
            "Summarise internationalisation considerations for",
        ),
        ("x" * 80 + " tail", "x" * AUTO_TITLE_CHARS),
        ("line\u2028separated\x07bell", "line separated bell"),
    ],
)
def test_a_first_message_becomes_a_short_title(text: str, title: str) -> None:
    made = title_from_text(text)
    assert made == title
    assert len(made) <= AUTO_TITLE_CHARS


def test_the_first_message_titles_an_untitled_session(api_client: Any) -> None:
    session_id = new_session(api_client)
    assert title_of(api_client, session_id) == ""
    say(api_client, session_id, "Please run the tests in the workspace and write a report on them.")
    say(api_client, session_id, "and then crawl example.com")
    assert title_of(api_client, session_id) == "Please run the tests in the"
    listed = api_client.get("/api/sessions").json()["sessions"]
    assert [s["title"] for s in listed] == ["Please run the tests in the"]


def test_a_title_given_at_creation_is_kept(api_client: Any) -> None:
    session_id = new_session(api_client, title="Release prep")
    say(api_client, session_id, "run the tests")
    assert title_of(api_client, session_id) == "Release prep"


def test_a_renamed_session_keeps_its_name(api_client: Any) -> None:
    before_any_message = new_session(api_client)
    renamed = rename(api_client, before_any_message, "  Checkout bugs  ")
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["title"] == "Checkout bugs"
    say(api_client, before_any_message, "run the tests")
    assert title_of(api_client, before_any_message) == "Checkout bugs"

    titled_automatically = new_session(api_client)
    say(api_client, titled_automatically, "crawl example.com")
    assert rename(api_client, titled_automatically, "Site health").status_code == 200
    say(api_client, titled_automatically, "write a report on the crawl")
    assert title_of(api_client, titled_automatically) == "Site health"
    assert AgentSession.objects.get(pk=titled_automatically).title == "Site health"


@pytest.mark.parametrize(
    "title",
    ["", "   ", "x" * 201, "nul\x00here", "two\nlines", "a\ttab", "bell\x07", "del\x7f", 42, None],
)
def test_a_title_that_cannot_be_one_is_refused(api_client: Any, title: Any) -> None:
    session_id = new_session(api_client, title="Kept")
    response = rename(api_client, session_id, title)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] in {"invalid_title", "invalid_request"}
    assert error["message"]
    assert title_of(api_client, session_id) == "Kept"


def test_a_rename_names_what_is_wrong(api_client: Any) -> None:
    session_id = new_session(api_client)
    error = rename(api_client, session_id, "two\nlines").json()["error"]
    assert error["code"] == "invalid_title" and "control characters" in error["message"]
    unknown = api_client.patch(
        f"/api/sessions/{session_id}", {"name": "x"}, content_type="application/json"
    )
    assert unknown.status_code == 422
    broken = api_client.patch(
        f"/api/sessions/{session_id}", "{not json", content_type="application/json"
    )
    assert broken.status_code == 400 and broken.json()["error"]["code"]


def test_someone_elses_or_a_deleted_session_is_not_found(
    api_client: Any, other_api_client: Any
) -> None:
    session_id = new_session(api_client, title="Mine")
    response = rename(other_api_client, session_id, "Theirs")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert title_of(api_client, session_id) == "Mine"
    assert api_client.delete(f"/api/sessions/{session_id}").status_code == 200
    gone = rename(api_client, session_id, "Again")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
    assert rename(api_client, "ses_nosuchsession", "x").status_code == 404


def test_a_response_api_session_is_titled_by_the_same_rule(user: Any) -> None:
    text = "Please run the tests in the workspace\nand write a report on them."
    response = response_create(owner=user, request=ResponseCreate(model="offline", input=text))
    title = AgentSession.objects.get(pk=response.session_id).title
    assert title == title_from_text(text) == "Please run the tests in the"
