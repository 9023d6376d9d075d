"""Model clients behind one small async interface.

``stream(system, messages, tools)`` yields ``TextDelta``s and ``ToolUse``s as
they arrive, then one ``Finish`` with the stop reason and the usage. Messages
and tools use the Anthropic Messages shapes (roles ``user``/``assistant``,
content blocks ``text``, ``tool_use``, ``tool_result``), which every client
here understands, plus agentsite's ``job_event`` block (``sessions.llm.blocks``):
a client that calls a model API sends it as its text.
"""

from __future__ import annotations

from django.conf import settings

from sessions.llm.base import (
    Finish,
    ModelClient,
    ModelError,
    StreamItem,
    TextDelta,
    ToolUse,
)
from sessions.llm.names import (
    ANTHROPIC,
    MODEL_NAMES_TEXT,
    OFFLINE,
    SCRIPTED,
    is_anthropic,
    scripted_enabled,
)
from sessions.llm.offline import OfflineModel
from sessions.llm.scripted import ScriptedModel

__all__ = [
    "Finish",
    "ModelClient",
    "ModelError",
    "StreamItem",
    "TextDelta",
    "ToolUse",
    "get_model_client",
]


def get_model_client(name: str = "", *, session_id: str | None = None) -> ModelClient:
    """The client for a model name: ``offline``, ``scripted`` or an Anthropic model.

    An empty name means ``settings.AGENTSITE_MODEL``. ``session_id`` lets the
    scripted model find the responses a test stored for that session.
    """
    name = name or settings.AGENTSITE_MODEL or OFFLINE
    if name == OFFLINE:
        return OfflineModel()
    if name == SCRIPTED:
        if not scripted_enabled():
            raise ValueError("the scripted model is for tests: AGENTSITE_SCRIPTED_MODEL is off")
        return ScriptedModel(key=session_id or "default")
    if is_anthropic(name):
        # Lazy: only a process that talks to Anthropic pays for importing its SDK.
        from sessions.llm.claude import AnthropicModel

        return AnthropicModel(model="" if name == ANTHROPIC else name)
    raise ValueError(f"unknown model {name!r}: use {MODEL_NAMES_TEXT}")
