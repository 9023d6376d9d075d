"""Refusals in OpenAI's error format, which the SDK turns into its exception classes."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

pytestmark = pytest.mark.django_db(transaction=True)


def test_another_users_response_is_not_found(
    client: OpenAI, client_for: Any, other_user: Any
) -> None:
    mine = client.responses.create(model="offline", input="hello")
    theirs = client_for(other_user)
    for call in (
        lambda: theirs.responses.retrieve(mine.id),
        lambda: theirs.responses.cancel(mine.id),
        lambda: theirs.responses.delete(mine.id),
        lambda: theirs.responses.input_items.list(mine.id),
        lambda: list(theirs.responses.retrieve(mine.id, stream=True)),
    ):
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert caught.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as refused:
        theirs.responses.create(model="offline", input="hi", previous_response_id=mine.id)
    assert refused.value.param == "previous_response_id"  # type: ignore[attr-defined]
    assert client.responses.retrieve(mine.id).status == "completed"


def test_unknown_and_malformed_ids_are_not_found(client: OpenAI) -> None:
    for response_id in ("resp_doesnotexist", "nonsense", "resp_" + "x" * 300):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response_id)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "gpt-4o", "input": "hi"}, "model"),
        ({"model": "offline", "input": ""}, "input"),
        ({"model": "offline", "input": 42}, "input"),
        ({"model": "offline", "input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
        ({"model": "offline", "input": [{"role": "user", "content": 3}]}, "input[0].content"),
        ({"input": "hi"}, "model"),
        ({"model": "offline", "input": "hi", "background": "maybe"}, "background"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    client: OpenAI, body: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.post("/responses", body=body, cast_to=httpx.Response)
    assert caught.value.param == param  # type: ignore[attr-defined]
    error = caught.value.body
    assert isinstance(error, dict) and set(error) == {"message", "type", "param", "code"}


def test_a_bad_token_is_an_authentication_error(responses_url: str, rq_workers: Any) -> None:
    stranger = OpenAI(base_url=responses_url, api_key="ast_nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.responses.create(model="offline", input="hi")


def test_input_items_and_delete(client: OpenAI) -> None:
    response = client.responses.create(
        model="agentsite",
        input=[
            {"role": "user", "content": "hello"},
            {"role": "user", "content": [{"type": "input_text", "text": "there"}]},
        ],
    )
    assert response.status == "completed" and response.output_text
    items = client.responses.input_items.list(response.id, order="asc")
    texts = [item.content[0].text for item in items.data]  # type: ignore[union-attr,index]
    assert texts == ["hello", "there"]
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_a_body_over_the_limit_is_a_413_in_openais_format(responses_url: str) -> None:
    from django.conf import settings

    too_big = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    answer = httpx.post(f"{responses_url}/responses", json={"model": "offline", "input": too_big})
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "request_too_large"


def test_deeply_nested_json_is_a_400_not_a_500(responses_url: str, user: Any) -> None:
    from accounts.models import ApiToken

    _, api_token = ApiToken.issue(user=user, name="nested")
    body = '{"model": "offline", "input": ' + "[" * 100_000 + "]" * 100_000 + "}"
    answer = httpx.post(
        f"{responses_url}/responses",
        content=body,
        headers={"Authorization": f"Bearer {api_token}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "nested_too_deep"
