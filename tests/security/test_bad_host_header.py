"""A Host header the server does not serve is a 400 in each surface's own format."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

BAD_HOST = {"Host": "attacker.example"}


def test_the_rest_api_answers_a_bad_host_in_its_error_format(api_client: Any) -> None:
    response = api_client.get("/api/me", headers=BAD_HOST)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": {
            "code": "disallowed_host",
            "message": "The Host header names no host this server answers for.",
        }
    }


def test_the_responses_api_answers_a_bad_host_in_openai_format() -> None:
    response = Client().post(
        "/v1/responses",
        {"model": "offline", "input": "hi"},
        content_type="application/json",
        headers=BAD_HOST,
    )

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "disallowed_host"
    assert error["message"] and error["param"] is None


def test_a_page_keeps_the_html_answer() -> None:
    response = Client().get("/login/", headers=BAD_HOST)

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
