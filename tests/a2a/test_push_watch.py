"""A session's log is watched while a task of it has push notification configurations,
and only then: the events of the others cost A2A nothing (``sessions.log_watch``)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_api.models import AgentTask
from a2a_api.push import push_config_delete, push_config_set
from sessions import log_watch
from sessions.events import event_append
from sessions.models import AgentSession, Event
from sessions.services import session_create

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/hook"


def watched(session: AgentSession) -> bool:
    return AgentSession.objects.get(pk=session.pk).watched


def test_a_session_is_watched_while_a_task_of_it_has_a_configuration(user: Any) -> None:
    session = session_create(owner=user)
    first = AgentTask.objects.create(owner=user, session=session)
    second = AgentTask.objects.create(owner=user, session=session)
    assert not watched(session)
    push_config_set(task=first, config_id="a", url=URL)
    push_config_set(task=second, config_id="b", url=URL)
    assert watched(session)
    push_config_delete(task=first, config_id="a")
    assert watched(session)  # the second task still has one
    push_config_delete(task=second, config_id="b")
    assert not watched(session)
    push_config_delete(task=second, config_id="b")  # idempotent, and changes nothing
    assert not watched(session)


def test_the_watchers_see_the_events_of_watched_sessions_only(
    user: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(log_watch, "_watchers", [lambda sid, kind, _: seen.append((sid, kind))])
    session = session_create(owner=user)
    task = AgentTask.objects.create(owner=user, session=session)

    def append() -> None:
        with django_capture_on_commit_callbacks(execute=True):
            event_append(session_id=session.pk, kind=Event.Kind.ERROR, payload={})

    append()
    assert seen == []
    push_config_set(task=task, config_id="a", url=URL)
    append()
    assert seen == [(session.pk, Event.Kind.ERROR)]
    push_config_delete(task=task, config_id="a")
    append()
    assert seen == [(session.pk, Event.Kind.ERROR)]
