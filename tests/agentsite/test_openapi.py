"""The OpenAPI document tells what each operation can answer, errors and streams included.

The fuzz in tests/fuzz holds the API to this document; these tests hold the
document to what it must say.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest
from django.test import Client

from jobs.models import Job
from jobs.registry import all_tools
from sessions.models import AgentSession, Event, Run

pytestmark = pytest.mark.django_db

ERROR_REF = "#/components/schemas/ErrorBody"
keys = itertools.count(1)


@pytest.fixture
def doc(client: Client) -> dict[str, Any]:
    return dict(client.get("/api/openapi.json").json())


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if path.startswith("/api/")
    ]


def error_schema(op: dict[str, Any], status: str) -> str | None:
    response = op["responses"].get(status)
    if response is None:
        return None
    ref: str | None = response["content"]["application/json"]["schema"].get("$ref")
    return ref


def test_every_operation_documents_its_error_answers(doc: dict[str, Any]) -> None:
    # Before: the sessions and runs operations documented none of their errors,
    # and the error body was an untyped object.
    assert doc["components"]["schemas"]["ErrorDetail"]["required"] == ["code", "message"]
    for method, path, op in operations(doc):
        for status in ("401", "500", "503"):
            assert error_schema(op, status) == ERROR_REF, (method, path, status)
        if "{" in path:  # takes an id: someone else's or an unknown one is a 404
            assert error_schema(op, "404") == ERROR_REF, (method, path)
    messages = doc["paths"]["/api/sessions/{session_id}/messages"]["post"]["responses"]
    assert {"202", "400", "404", "413", "422"} <= set(messages)


# Every status each operation can answer, and no other: the fuzz checks that the
# API answers nothing outside this; each entry here has a cause in the code.
ANSWERS = {
    ("GET", "/api/me"): {200},
    ("POST", "/api/jobs"): {202, 400, 403, 413, 422, 429},
    ("GET", "/api/jobs"): {200, 422},
    ("GET", "/api/jobs/{job_id}"): {200, 404},
    ("DELETE", "/api/jobs/{job_id}"): {202, 403, 404, 409},
    ("GET", "/api/jobs/{job_id}/result"): {200, 404, 409, 422},
    ("GET", "/api/webhook-secret"): {200},
    ("POST", "/api/webhook-secret/rotate"): {200, 403, 413},
    ("GET", "/api/webhooks"): {200},
    ("PUT", "/api/webhooks"): {200, 400, 403, 413, 422},
    ("POST", "/api/sessions"): {201, 400, 403, 413, 422},
    ("GET", "/api/sessions"): {200},
    ("GET", "/api/sessions/{session_id}"): {200, 404},
    ("PATCH", "/api/sessions/{session_id}"): {200, 400, 403, 404, 413, 422},
    ("DELETE", "/api/sessions/{session_id}"): {200, 403, 404},
    ("POST", "/api/sessions/{session_id}/messages"): {202, 400, 403, 404, 413, 422, 429},
    ("GET", "/api/sessions/{session_id}/events"): {200, 400, 404, 422},
    ("GET", "/api/sessions/{session_id}/stream"): {200, 400, 404},
    ("GET", "/api/runs/{run_id}"): {200, 400, 404},
    ("POST", "/api/runs/{run_id}/cancel"): {202, 403, 404, 413},
    ("GET", "/api/runs/{run_id}/stream"): {200, 400, 404},
    ("GET", "/api/tokens"): {200},
    ("POST", "/api/tokens"): {201, 400, 403, 413, 422},
    ("DELETE", "/api/tokens/{token_id}"): {204, 403, 404, 422},
    ("GET", "/api/approvals"): {200, 400, 422},
    ("GET", "/api/approvals/{approval_id}"): {200, 404},
    ("POST", "/api/approvals/{approval_id}/decision"): {200, 400, 403, 404, 409, 413, 422},
}


def test_each_operation_documents_exactly_the_statuses_it_can_answer(
    doc: dict[str, Any],
) -> None:
    # Before: every job operation listed 400, 404, 409, 413 and 422 whether it
    # could answer them or not, and no unsafe method listed CSRF's 403.
    documented = {
        (method, path): {int(status) for status in op["responses"]}
        for method, path, op in operations(doc)
    }
    assert documented == {key: answers | {401, 500, 503} for key, answers in ANSWERS.items()}


def test_a_post_without_a_token_is_401_not_a_csrf_refusal() -> None:
    # Before: SessionAuth checked CSRF before it looked for a login, so a script
    # with a missing or wrong token was told "CSRF check Failed" (403).
    browserless = Client(enforce_csrf_checks=True)
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = browserless.post(
            "/api/sessions", {}, content_type="application/json", headers=headers
        )
        assert response.status_code == 401, response.content
        assert response.json()["error"]["code"] == "unauthorized"


def test_a_logged_in_browser_still_needs_its_csrf_token(user: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    response = browser.post("/api/sessions", {}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


@pytest.mark.parametrize(
    "url",
    [
        "/api/jobs?offset=30684386799929184256",
        "/api/jobs?offset=2147483648",
        "/api/jobs/job_0000/result?cursor=30684386799929184256",
    ],
)
def test_a_position_past_the_databases_integers_is_refused(api_client: Client, url: str) -> None:
    # Before: the offset went to the database, whose integer overflowed (500).
    response = api_client.get(url)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize(
    "url",
    [
        "/api/sessions/ses_a%00b",
        "/api/sessions/ses_a%00b/events",
        "/api/runs/run_a%00b",
        "/api/jobs/job_a%00b",
    ],
)
def test_an_id_with_a_nul_character_is_not_found(api_client: Client, url: str) -> None:
    # Before, on PostgreSQL: the NUL reached a text column and failed the query (500).
    response = api_client.get(url)
    assert response.status_code == 404, response.content


def test_a_job_start_links_to_every_operation_on_the_job(doc: dict[str, Any]) -> None:
    # Before: nothing linked a created job to the operations that take its id.
    links = doc["paths"]["/api/jobs"]["post"]["responses"]["202"]["links"]
    taking_job_id = {op["operationId"] for _, path, op in operations(doc) if "{job_id}" in path}
    assert {link["operationId"] for link in links.values()} == taking_job_id
    for link in links.values():
        assert link["parameters"] == {"job_id": "$response.body#/job_id"}
    location = doc["paths"]["/api/jobs"]["post"]["responses"]["202"]["headers"]["Location"]
    assert location["required"] is True


def test_created_sessions_and_runs_link_to_the_operations_on_them(doc: dict[str, Any]) -> None:
    created = {
        "session_id": doc["paths"]["/api/sessions"]["post"]["responses"]["201"]["links"],
        "run_id": doc["paths"]["/api/sessions/{session_id}/messages"]["post"]["responses"]["202"][
            "links"
        ],
    }
    for parameter, links in created.items():
        taking = {
            op["operationId"] for _, path, op in operations(doc) if f"{{{parameter}}}" in path
        }
        assert {link["operationId"] for link in links.values()} == taking, parameter


def test_every_success_answer_has_a_typed_body(doc: dict[str, Any]) -> None:
    # Before: the sessions and runs operations answered a free-form object.
    schemas = doc["components"]["schemas"]
    for method, path, op in operations(doc):
        for status, response in op["responses"].items():
            if not status.startswith("2"):
                continue
            if status == "204":  # No Content: nothing to type
                assert "content" not in response, (method, path)
                continue
            for media in response["content"].values():
                schema = media["schema"]
                if "$ref" in schema:
                    schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
                assert "properties" in schema or "anyOf" in schema, (method, path, status)


def test_every_503_says_when_to_retry(doc: dict[str, Any]) -> None:
    for method, path, op in operations(doc):
        header = op["responses"]["503"]["headers"]["Retry-After"]
        assert header["required"] is True, (method, path)


def test_the_stream_operations_describe_each_event(doc: dict[str, Any]) -> None:
    # Before: the stream was "a string", then an `x-sse-event` no tool reads. In
    # OpenAPI 3.1 the schema of an event stream describes each event.
    for path in ("/api/sessions/{session_id}/stream", "/api/runs/{run_id}/stream"):
        media = doc["paths"][path]["get"]["responses"]["200"]["content"]["text/event-stream"]
        event = media["schema"]
        assert event["required"] == ["id", "data"]
        frame = event["properties"]["data"]["contentSchema"]
        assert frame["required"] == ["seq", "kind", "payload", "token"]
        assert set(frame["properties"]["kind"]["enum"]) == {kind.value for kind in Event.Kind}


def test_documented_states_are_the_models_states(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    assert set(schemas["JobStatus"]["properties"]["status"]["enum"]) == set(Job.Status.values)
    assert set(schemas["RunPoll"]["properties"]["status"]["enum"]) == set(Run.Status.values)
    assert set(schemas["SessionDoc"]["properties"]["state"]["enum"]) == set(
        AgentSession.State.values
    )
    assert set(schemas["EventDoc"]["properties"]["kind"]["enum"]) == set(Event.Kind.values)


# --- POST /api/jobs: the documented body is the validated body -------------------------


def job_start_validator(doc: dict[str, Any]) -> jsonschema.Draft202012Validator:
    schema = {"$ref": "#/components/schemas/JobStart", "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


def test_the_documented_tools_are_the_async_tools(doc: dict[str, Any]) -> None:
    # Before: `tool` was any string and `args` any object.
    start = doc["components"]["schemas"]["JobStart"]
    async_tools = [tool for tool in all_tools() if tool.kind == "async"]
    assert start["properties"]["tool"]["enum"] == [tool.name for tool in async_tools]
    variants = {variant["properties"]["tool"]["const"]: variant for variant in start["oneOf"]}
    for tool in async_tools:
        assert variants[tool.name]["properties"]["args"] == tool.input_schema()
    params = doc["paths"]["/api/jobs"]["post"]["parameters"]
    assert [(p["name"], p["required"]) for p in params] == [("Idempotency-Key", True)]


# Bodies the API refuses for their shape, which the document must refuse too.
REFUSED = [
    {"tool": "no_such_tool"},
    {"tool": "clock"},
    {"tool": "sleepy", "args": {"seconds": "long"}},
    {"tool": "sleepy", "args": {"seconds": -1}},
    {"tool": "gated", "args": {}},
    {"tool": "run_tests", "args": {"path": ".", "verbose": True}},
    {"tool": "sleepy", "timeout_s": 0},
    {"tool": "sleepy", "timeout_s": 121},
    {"tool": "run_tests", "timeout_s": 3601},
    {"tool": "sleepy", "depends_on": ["not a job id"]},
    {"tool": "sleepy", "depends_on": [f"job_{i}" for i in range(21)]},
    {"tool": "sleepy", "depends_on": ["job_1"] * 21},
    {"tool": "sleepy", "session_id": "not a session"},
    {"tool": "sleepy", "session_id": 7},
    {"tool": "sleepy", "callback_url": "x" * 2001},
    {"tool": "sleepy", "timeout": 5},
    {"args": {}},
    {"tool": "sleepy", "args": [1, 2]},
]
# Bodies the API accepts, which the document must allow.
ACCEPTED = [
    {"tool": "noop"},
    {"tool": "sleepy", "args": {"seconds": 0.1}, "timeout_s": 120},
    {"tool": "run_tests", "args": {"path": "."}, "timeout_s": 0.5},
    {"tool": "noop", "depends_on": [], "session_id": None, "callback_url": ""},
]


@pytest.mark.parametrize("body", REFUSED, ids=lambda body: json.dumps(body)[:60])
def test_a_body_the_api_refuses_is_one_the_document_refuses(
    api_client: Client, doc: dict[str, Any], body: dict[str, Any]
) -> None:
    # Before: the document allowed every one of these.
    response = post_job(api_client, body)
    assert response.status_code == 422, response.content
    assert not job_start_validator(doc).is_valid(body)


@pytest.mark.parametrize("body", ACCEPTED, ids=lambda body: json.dumps(body)[:60])
def test_a_body_the_api_accepts_is_one_the_document_allows(
    api_client: Client, doc: dict[str, Any], body: dict[str, Any]
) -> None:
    response = post_job(api_client, body)
    assert response.status_code == 202, response.content
    job_start_validator(doc).validate(body)


def post_job(client: Client, body: dict[str, Any]) -> Any:
    key = f"key-{next(keys)}"
    return client.post(
        "/api/jobs", body, content_type="application/json", headers={"Idempotency-Key": key}
    )


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/sessions", {"title": "a\x00b"}),
        ("/api/jobs", {"tool": "write_report", "args": {"topic": "a\x00b"}}),
        ("/api/jobs", {"tool": "noop", "args": {"a\x00": 1}}),
    ],
)
def test_text_with_a_nul_character_is_refused(
    api_client: Client, url: str, body: dict[str, Any]
) -> None:
    # Before, on PostgreSQL: the NUL reached a text or JSON column (500).
    response = api_client.post(
        url, body, content_type="application/json", headers={"Idempotency-Key": "nul"}
    )
    assert response.status_code == 422, response.content
    assert "NUL" in response.json()["error"]["details"][0]["message"]


def test_a_message_with_a_nul_character_is_refused(api_client: Client) -> None:
    session = api_client.post("/api/sessions", {}, content_type="application/json").json()
    response = api_client.post(
        f"/api/sessions/{session['session_id']}/messages",
        {"text": "hello\x00"},
        content_type="application/json",
    )
    assert response.status_code == 422, response.content


@pytest.mark.parametrize("query", ["tool=a%00b", "session_id=ses_a%00b"])
def test_a_job_filter_with_a_nul_character_matches_nothing(api_client: Client, query: str) -> None:
    response = api_client.get(f"/api/jobs?{query}")
    assert response.status_code == 200, response.content
    assert response.json()["items"] == []


def component_validator(doc: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    schema = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(
    ("body", "accepted"),
    [
        ({"model": "offline"}, True),
        ({"model": " claude-sonnet-4-5\n"}, True),
        ({"model": "\u3000"}, True),
        ({"model": "gpt-4"}, False),
        ({"model": "offline-ish"}, False),
        ({"title": "t", "colour": "red"}, False),
    ],
)
def test_the_documented_session_body_is_the_validated_one(
    api_client: Client, doc: dict[str, Any], body: dict[str, Any], accepted: bool, settings: Any
) -> None:
    # The document tells the shape of a name; which models are offered is the deployment's.
    settings.AGENTSITE_ALLOWED_MODELS = ["offline", "claude-*"]
    response = api_client.post("/api/sessions", body, content_type="application/json")
    assert response.status_code == (201 if accepted else 422), response.content
    assert component_validator(doc, "SessionIn").is_valid(body) is accepted


@pytest.mark.parametrize(
    ("text", "accepted"),
    [("hi", True), (" \t\n", False), ("\u3000\x1c", False), ("\ufeff", True)],
)
def test_the_documented_message_body_is_the_validated_one(
    api_client: Client, doc: dict[str, Any], text: str, accepted: bool
) -> None:
    # JSON Schema's \s is not Python's: U+FEFF is blank to one, U+001C to the other.
    session = api_client.post("/api/sessions", {}, content_type="application/json").json()
    response = api_client.post(
        f"/api/sessions/{session['session_id']}/messages",
        {"text": text},
        content_type="application/json",
    )
    assert response.status_code == (202 if accepted else 422), response.content
    assert component_validator(doc, "MessageIn").is_valid({"text": text}) is accepted


@pytest.mark.parametrize(
    ("body", "accepted"),
    [
        ({"title": "Renamed"}, True),
        ({"callback_url": "http://127.0.0.1:9/hook"}, True),
        ({"callback_url": ""}, True),
        ({"title": "Renamed", "callback_url": ""}, True),
        ({}, False),
        ({"title": None}, False),
        ({"callback_url": None}, False),
        ({"title": ""}, False),
        ({"title": "t", "colour": "red"}, False),
    ],
)
def test_the_documented_session_patch_is_the_validated_one(
    api_client: Client, doc: dict[str, Any], body: dict[str, Any], accepted: bool
) -> None:
    # Both fields are optional, and at least one must be sent.
    session = api_client.post("/api/sessions", {}, content_type="application/json").json()
    response = api_client.patch(
        f"/api/sessions/{session['session_id']}", body, content_type="application/json"
    )
    assert response.status_code == (200 if accepted else 422), response.content
    assert component_validator(doc, "SessionPatch").is_valid(body) is accepted
