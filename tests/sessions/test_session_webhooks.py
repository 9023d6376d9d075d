"""A session's events are posted, signed, to the session's address, else to its owner's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from django.db import transaction

from jobs.models import WebhookDelivery
from jobs.webhooks import webhook_verify
from sessions.webhooks import session_webhook_send
from tests.conftest import wait_until
from tests.jobs.test_webhooks import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    """Two receivers: the first fails its first post, the second accepts every post."""
    servers = [Receiver(failures=1), Receiver(failures=0)]
    yield servers
    for server in servers:
        server.server.shutdown()


def new_session(api_client: Any, **fields: Any) -> str:
    created = api_client.post("/api/sessions", fields, content_type="application/json")
    assert created.status_code == 201, created.content
    return str(created.json()["session_id"])


def patch(api_client: Any, session_id: str, body: dict[str, Any]) -> Any:
    return api_client.patch(f"/api/sessions/{session_id}", body, content_type="application/json")


def own_url_set(api_client: Any, url: str) -> Any:
    return api_client.put("/api/webhooks", {"callback_url": url}, content_type="application/json")


def send_committed(session_id: str, event_type: str, data: dict[str, Any]) -> None:
    with transaction.atomic():
        session_webhook_send(session_id=session_id, event_type=event_type, data=data)


def test_an_event_is_posted_signed_to_the_sessions_address_and_retried(
    api_client: Any, user: Any, rq_workers: Any, rq_scheduler: Any, receivers: list[Receiver]
) -> None:
    session_address, own_address = receivers
    secret = api_client.get("/api/webhook-secret").json()["secret"]
    assert own_url_set(api_client, own_address.url).status_code == 200
    session_id = new_session(api_client, title="Deploy", callback_url=session_address.url)
    assert api_client.get(f"/api/sessions/{session_id}").json()["callback_url"] == (
        session_address.url
    )

    send_committed(session_id, "approval.requested", {"approval_id": "apr_1", "tool": "deploy"})

    wait_until(lambda: len(session_address.received) >= 2, timeout=30)
    (first_headers, _, first_status), (headers, body, status) = session_address.received[:2]
    assert (first_status, status) == (500, 204)
    assert first_headers["webhook-id"] == headers["webhook-id"]
    assert webhook_verify(secret, headers, body)
    payload = json.loads(body)
    assert payload["type"] == "approval.requested"
    assert payload["data"] == {"approval_id": "apr_1", "tool": "deploy", "session_id": session_id}
    assert datetime.fromisoformat(payload["timestamp"]).tzinfo is not None

    delivery = wait_until(
        lambda: (
            WebhookDelivery.objects.filter(message_id=headers["webhook-id"])
            .exclude(status=WebhookDelivery.Status.PENDING)
            .first()
        )
    )
    assert delivery.status == WebhookDelivery.Status.DELIVERED
    assert (delivery.owner_id, delivery.job_id, delivery.event_type, delivery.url) == (
        user.pk,
        None,
        "approval.requested",
        session_address.url,
    )
    assert WebhookDelivery.objects.count() == 1  # nothing for the owner's own address


def test_a_session_without_an_address_posts_to_its_owners(
    api_client: Any, rq_workers: Any, receivers: list[Receiver]
) -> None:
    _, own_address = receivers
    secret = api_client.get("/api/webhook-secret").json()["secret"]
    assert api_client.get("/api/webhooks").json() == {"callback_url": ""}
    put = own_url_set(api_client, own_address.url)
    assert put.status_code == 200 and put.json() == {"callback_url": own_address.url}
    assert api_client.get("/api/webhooks").json() == {"callback_url": own_address.url}
    # The secret stays the one the owner already holds.
    assert api_client.get("/api/webhook-secret").json()["secret"] == secret

    session_id = new_session(api_client, callback_url="http://127.0.0.1:9/elsewhere")
    cleared = patch(api_client, session_id, {"callback_url": ""})
    assert cleared.status_code == 200 and cleared.json()["callback_url"] == ""

    send_committed(session_id, "approval.decided", {"approval_id": "apr_2", "decision": "allow"})

    wait_until(lambda: own_address.received)
    headers, body, _ = own_address.received[0]
    assert webhook_verify(secret, headers, body)
    assert json.loads(body)["type"] == "approval.decided"
    assert json.loads(body)["data"]["session_id"] == session_id


def test_nothing_is_recorded_without_an_address_a_session_or_a_commit(
    api_client: Any, user: Any, receivers: list[Receiver]
) -> None:
    session_id = new_session(api_client)
    send_committed(session_id, "approval.requested", {"approval_id": "apr_3"})
    assert not WebhookDelivery.objects.exists()

    assert own_url_set(api_client, receivers[1].url).status_code == 200
    with pytest.raises(RuntimeError), transaction.atomic():
        session_webhook_send(session_id=session_id, event_type="approval.requested", data={})
        assert WebhookDelivery.objects.count() == 1
        raise RuntimeError("the caller's transaction fails")
    assert not WebhookDelivery.objects.exists()  # rolled back with it: nothing to send

    assert api_client.delete(f"/api/sessions/{session_id}").status_code == 200
    send_committed(session_id, "approval.requested", {})
    send_committed("ses_nosuchsession", "approval.requested", {})
    assert not WebhookDelivery.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/hook",
        "http://[::1]:8000/hook",
        "ftp://127.0.0.1/hook",
        "not a url",
        "http://" + "a" * 1990 + ".test/",
    ],
)
def test_an_address_webhooks_may_not_reach_is_refused(api_client: Any, url: str) -> None:
    session_id = new_session(api_client, callback_url="http://127.0.0.1:9/kept")

    for response in (
        patch(api_client, session_id, {"callback_url": url}),
        api_client.post("/api/sessions", {"callback_url": url}, content_type="application/json"),
        own_url_set(api_client, url),
    ):
        assert response.status_code == 422, response.content
        error = response.json()["error"]
        assert error["code"] in {"callback_url_refused", "invalid_request"} and error["message"]
        if len(url) <= 2000:
            assert error["code"] == "callback_url_refused"

    assert api_client.get(f"/api/sessions/{session_id}").json()["callback_url"] == (
        "http://127.0.0.1:9/kept"
    )
    assert api_client.get("/api/webhooks").json()["callback_url"] == ""


def test_a_patch_changes_only_what_it_sends(api_client: Any) -> None:
    session_id = new_session(api_client, title="Kept")

    moved = patch(api_client, session_id, {"callback_url": "http://127.0.0.1:9/hook"})
    assert moved.status_code == 200, moved.content
    assert (moved.json()["title"], moved.json()["callback_url"]) == (
        "Kept",
        "http://127.0.0.1:9/hook",
    )
    renamed = patch(api_client, session_id, {"title": "Renamed"})
    assert (renamed.json()["title"], renamed.json()["callback_url"]) == (
        "Renamed",
        "http://127.0.0.1:9/hook",
    )
    both = patch(api_client, session_id, {"title": "Both", "callback_url": ""})
    assert (both.json()["title"], both.json()["callback_url"]) == ("Both", "")

    empty = patch(api_client, session_id, {})
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "invalid_request"
    assert patch(api_client, session_id, {"callback_url": None}).status_code == 422
    assert api_client.get(f"/api/sessions/{session_id}").json()["title"] == "Both"


def test_someone_elses_session_is_not_found(api_client: Any, other_api_client: Any) -> None:
    session_id = new_session(api_client, callback_url="http://127.0.0.1:9/mine")

    response = patch(other_api_client, session_id, {"callback_url": "http://127.0.0.1:9/theirs"})

    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert api_client.get(f"/api/sessions/{session_id}").json()["callback_url"] == (
        "http://127.0.0.1:9/mine"
    )
    assert other_api_client.get("/api/webhooks").json() == {"callback_url": ""}
