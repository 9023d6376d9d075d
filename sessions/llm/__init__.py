"""Model clients behind one small async interface.

``stream(system, messages, tools)`` yields ``TextDelta``s and ``ToolUse``s as
they arrive, then one ``Finish`` with the stop reason and the usage. Messages
and tools use the Anthropic Messages shapes (roles ``user``/``assistant``,
content blocks ``text``, ``tool_use``, ``tool_result``), which every client
here understands.
"""

from __future__ import annotations

from sessions.llm.base import (
    Finish,
    ModelClient,
    ModelError,
    StreamItem,
    TextDelta,
    ToolUse,
)

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
    from django.conf import settings

    name = name or settings.AGENTSITE_MODEL or "offline"
    if name == "offline":
        from sessions.llm.offline import OfflineModel

        return OfflineModel()
    if name == "scripted":
        from sessions.llm.scripted import ScriptedModel

        return ScriptedModel(key=session_id or "default")
    if name.startswith("claude") or name == "anthropic":
        from sessions.llm.claude import AnthropicModel

        return AnthropicModel(model=name if name != "anthropic" else "")
    raise ValueError(f"unknown model {name!r}: use offline, scripted or a claude-* model name")
