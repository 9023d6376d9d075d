"""The request bodies of ``/v1/responses`` and how their input becomes one user message."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentsite.core.errors import Invalid

MAX_INPUT_CHARS = 100_000


class ResponseCreate(BaseModel):
    """What ``POST /v1/responses`` takes; fields the API knows but agentsite has no use
    for (temperature, reasoning, …) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1, max_length=100)
    input: str | list[dict[str, Any]]
    instructions: str | None = Field(default=None, max_length=20_000)
    background: bool = False
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, str] | None = None


Role = Literal["user", "assistant", "system", "developer"]


def invalid(param: str, message: str, code: str = "invalid_value") -> Invalid:
    return Invalid(code, message, details={"param": param})


def input_items(raw: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input as a list of message items (a string is one user message)."""
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    items: list[dict[str, Any]] = []
    for n, item in enumerate(raw):
        kind = item.get("type", "message")
        if kind == "message":
            items.append(_message_item(item, f"input[{n}]"))
        elif kind == "function_call_output":
            output = item.get("output")
            if not isinstance(output, str):
                raise invalid(
                    f"input[{n}].output", "A function_call_output needs an output string."
                )
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(item.get("call_id")),
                    "output": output,
                }
            )
        else:
            raise invalid(f"input[{n}].type", f"Input items of type {kind!r} are not supported.")
    if not items:
        raise invalid("input", "The input is empty.", "empty_input")
    return items


def _message_item(item: dict[str, Any], param: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise invalid(f"{param}.role", "role must be user, assistant, system or developer.")
    content = item.get("content")
    if isinstance(content, str):
        parts = [{"type": "input_text" if role != "assistant" else "output_text", "text": content}]
    elif isinstance(content, list):
        parts = []
        for m, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in (
                "input_text",
                "output_text",
                "text",
            ):
                raise invalid(f"{param}.content[{m}]", "Only text content is supported.")
            if not isinstance(part.get("text"), str):
                raise invalid(f"{param}.content[{m}].text", "text must be a string.")
            parts.append({"type": part["type"], "text": part["text"]})
    else:
        raise invalid(f"{param}.content", "content must be a string or a list of parts.")
    return {"type": "message", "role": role, "content": parts}


def input_text(items: list[dict[str, Any]]) -> str:
    """The user message the agent is sent: the texts of the input, in order.

    Only the user's (and function outputs') words make the message; an assistant
    message in the input is history the session already has, and system or
    developer text is the session's prompt.
    """
    texts: list[str] = []
    for item in items:
        if item["type"] == "function_call_output":
            texts.append(f"[function_call_output call_id={item['call_id']}]\n{item['output']}")
        elif item["role"] == "user":
            texts.extend(part["text"] for part in item["content"] if part["text"].strip())
    text = "\n\n".join(texts).strip()
    if not text:
        raise invalid("input", "The input has no user text.", "empty_input")
    if len(text) > MAX_INPUT_CHARS or "\x00" in text:
        raise invalid("input", f"The input must be text under {MAX_INPUT_CHARS} characters.")
    return text


def system_text(items: list[dict[str, Any]]) -> str:
    return "\n\n".join(
        part["text"]
        for item in items
        if item["type"] == "message" and item["role"] in ("system", "developer")
        for part in item["content"]
    )
