from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jobs.models import WebhookAttempt, WebhookDelivery
from jobs.webhooks import webhook_sign, webhook_verify
from tests.conftest import wait_until
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A local HTTP server that fails the first ``failures`` posts, then accepts."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes, int]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = 500 if len(receiver.received) < receiver.failures else 204
                receiver.received.append((dict(self.headers), body, status))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver(failures=1)
    yield server
    server.server.shutdown()


def test_a_finished_job_is_posted_signed_and_retried_until_accepted(
    api_client: Any, user: Any, rq_workers: Any, rq_scheduler: Any, receiver: Receiver
) -> None:
    secret = api_client.get("/api/webhook-secret").json()["secret"]
    assert secret.startswith("whsec_")

    job_id = started_job_id(api_client, "noop", callback_url=receiver.url)

    wait_until(lambda: len(receiver.received) >= 2, timeout=30)
    (first_headers, _, first_status), (headers, body, status) = receiver.received[:2]
    assert (first_status, status) == (500, 204)
    # Same message id on every attempt, so the receiver can deduplicate.
    assert first_headers["webhook-id"] == headers["webhook-id"]
    assert webhook_verify(secret, headers, body)
    assert not webhook_verify(secret, headers, body + b" ")
    payload = json.loads(body)
    assert payload["type"] == "job_completed"
    assert payload["data"]["job_id"] == job_id
    assert payload["data"]["status"] == "done"

    delivery = wait_until(
        lambda: WebhookDelivery.objects.filter(job_id=job_id, status="delivered").first()
    )
    attempts = list(WebhookAttempt.objects.filter(delivery=delivery).order_by("number"))
    assert [(a.number, a.status_code, a.ok) for a in attempts] == [(1, 500, False), (2, 204, True)]
    assert (delivery.owner_id, delivery.event_type) == (user.pk, "job_completed")


def test_a_job_is_posted_to_its_own_address_only(
    api_client: Any, rq_workers: Any, receiver: Receiver
) -> None:
    # The owner's address is for their sessions' events; a job names its own.
    put = api_client.put(
        "/api/webhooks", {"callback_url": receiver.url}, content_type="application/json"
    )
    assert put.status_code == 200, put.content

    job_id = started_job_id(api_client, "noop")
    wait_for_status(job_id, "done")

    assert not WebhookDelivery.objects.exists()


def test_the_signature_follows_standard_webhooks() -> None:
    # The example of the Standard Webhooks specification.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    signature = webhook_sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
