"""A response whose session its owner deleted is gone from /v1 too, as the session is
from every other path: each operation on it is a 404 in OpenAI's format."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from responses.models import AgentResponse

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_operation_on_a_response_of_a_deleted_session_is_not_found(
    client: OpenAI, responses_url: str
) -> None:
    answered = client.responses.create(model="offline", input="hello")
    assert answered.status == "completed"
    session_id = AgentResponse.objects.get(pk=answered.id).session_id
    site = responses_url.removesuffix("/v1")
    deleted = httpx.delete(
        f"{site}/api/sessions/{session_id}",
        headers={"Authorization": f"Bearer {client.api_key}"},
        timeout=30,
    )
    assert deleted.status_code == 200, deleted.text

    for call in (
        lambda: client.responses.retrieve(answered.id),
        lambda: list(client.responses.retrieve(answered.id, stream=True)),
        lambda: client.responses.cancel(answered.id),
        lambda: client.responses.input_items.list(answered.id),
        lambda: client.responses.delete(answered.id),
    ):
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        body: Any = caught.value.body
        assert body["type"] == "invalid_request_error"
        assert answered.id in body["message"]


def test_a_response_of_a_deleted_session_cannot_be_continued(
    client: OpenAI, responses_url: str
) -> None:
    answered = client.responses.create(model="offline", input="hello")
    session_id = AgentResponse.objects.get(pk=answered.id).session_id
    site = responses_url.removesuffix("/v1")
    httpx.delete(
        f"{site}/api/sessions/{session_id}",
        headers={"Authorization": f"Bearer {client.api_key}"},
        timeout=30,
    ).raise_for_status()

    # The same answer as for an unknown previous response.
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="offline", input="again", previous_response_id=answered.id)
    assert refused.value.param == "previous_response_id"  # type: ignore[attr-defined]
    assert refused.value.code == "invalid_value"
    assert "not found" in refused.value.message
