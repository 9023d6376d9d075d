"""A request that waits for its response's end (neither background nor stream) blocks no
thread: the web server answers other requests meanwhile."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from openai import OpenAI

from responses.models import AgentResponse
from sessions.llm.scripted import scripted_open, scripted_push
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_other_requests_are_answered_while_one_waits(client: OpenAI, responses_url: str) -> None:
    first = client.responses.create(model="scripted", input="hello")
    session_id = AgentResponse.objects.get(pk=first.id).session_id
    scripted_push(session_id, {"text": "Held until the gate opens.", "gate": "hold"})

    waited: list[object] = []
    waiter = threading.Thread(
        target=lambda: waited.append(
            client.responses.create(model="scripted", input="wait", previous_response_id=first.id)
        )
    )
    waiter.start()
    wait_until(lambda: AgentResponse.objects.filter(session_id=session_id).count() == 2)
    try:
        started = time.monotonic()
        answered = httpx.get(
            f"{responses_url}/responses/{first.id}",
            headers={"Authorization": f"Bearer {client.api_key}"},
            timeout=10,
        )
        assert answered.status_code == 200
        assert time.monotonic() - started < 10  # long before the gate opens (60 s)
        assert not waited  # it is still waiting
    finally:
        scripted_open(session_id, "hold")
        waiter.join(30)
    assert waited and waited[0].status == "completed"  # type: ignore[attr-defined]
    assert waited[0].output_text == "Held until the gate opens."  # type: ignore[attr-defined]
