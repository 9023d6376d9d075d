"""Where an app above jobs plugs in, so that jobs never imports it.

A job may belong to a session, but sessions sit above jobs: ``sessions`` imports
``jobs``, never the other way round. What jobs needs from sessions it asks
through the three hook points below, which ``sessions`` fills at startup
(``SessionsConfig.ready()``):

- ``session_event``: a job's event for its session. Called **inside the job's
  transaction** (in a savepoint), so the session's rows commit or roll back
  with the job's state; whatever it publishes it publishes on commit
  (``transaction.on_commit``) — committed before published.
- ``session_is_live``: whether a ``session_id`` names one of an owner's live
  sessions, asked when a job is started in a session.
- ``session_model``: the model a tool may write prose with for a session
  (``write_report``), through ``ToolContext.model()``.

With nothing registered (jobs used on their own) jobs behave as if there were
no sessions: no session events, every ``session_id`` is unknown, no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jobs.documents import JobEventPayload


class SessionEventHook(Protocol):
    def __call__(self, *, session_id: str, payload: JobEventPayload) -> None:
        """Record the job event ``payload`` in the session, in the caller's transaction.

        A final event (``JobEventName(payload["event"]).is_final``) is news for the
        session's agent; the others are for its log.
        """


class SessionIsLiveHook(Protocol):
    def __call__(self, *, owner: Any, session_id: str) -> bool:
        """True if ``session_id`` is one of ``owner``'s (a user's) sessions, not deleted."""


class TextModel(Protocol):
    """A model that writes text, blocking until it is written."""

    name: str

    def write(self, *, system: str, prompt: str) -> str:
        """The model's answer to ``prompt``, whole."""


class SessionModelHook(Protocol):
    def __call__(self, *, session_id: str) -> TextModel | None:
        """The model of the session for tools that write prose, or None if it writes none."""


@dataclass
class Hooks:
    session_event: SessionEventHook | None = None
    session_is_live: SessionIsLiveHook | None = None
    session_model: SessionModelHook | None = None


_registered = Hooks()


def hooks_register(
    *,
    session_event: SessionEventHook | None = None,
    session_is_live: SessionIsLiveHook | None = None,
    session_model: SessionModelHook | None = None,
) -> None:
    """Fill the hook points given (at startup, from an ``AppConfig.ready()``)."""
    if session_event is not None:
        _registered.session_event = session_event
    if session_is_live is not None:
        _registered.session_is_live = session_is_live
    if session_model is not None:
        _registered.session_model = session_model


def session_event_record(*, session_id: str, payload: JobEventPayload) -> None:
    if _registered.session_event is not None:
        _registered.session_event(session_id=session_id, payload=payload)


def session_is_live(*, owner: Any, session_id: str) -> bool:
    hook = _registered.session_is_live
    return hook is not None and hook(owner=owner, session_id=session_id)


def session_model(*, session_id: str | None) -> TextModel | None:
    hook = _registered.session_model
    if hook is None or not session_id:
        return None
    return hook(session_id=session_id)
