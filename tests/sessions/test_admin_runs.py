"""The runs admin shows timings and interrupts runs through the run lifecycle."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from sessions.models import Run
from sessions.services import message_post
from tests.sessions.factories import make_session

pytestmark = pytest.mark.django_db


def test_the_admin_interrupts_selected_runs(make_user: Any) -> None:
    admin_user = make_user("root", is_staff=True, is_superuser=True)
    _, run = message_post(session=make_session(admin_user), text="hi")
    client = Client()
    client.force_login(admin_user)
    assert client.get("/admin/agent_sessions/run/").status_code == 200
    response = client.post(
        "/admin/agent_sessions/run/",
        {"action": "runs_interrupt", "_selected_action": [run.id]},
        follow=True,
    )
    assert response.status_code == 200
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert "1 run(s): cancelled" in response.content.decode()
