"""The request bodies of ``/v1/responses`` and how their input and tools become one user
message: its text, the client's function tools, and its outputs of earlier function calls;
and the input's decisions on the agent's requests (``mcp_approval_response`` items)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentsite.core.errors import Invalid
from sessions.payloads import ClientTool, ClientToolResult

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
            items.append(_function_call_output(item, f"input[{n}]"))
        elif kind == "function_call":
            items.append(_function_call(item, f"input[{n}]"))
        elif kind == "mcp_approval_response":
            items.append(_approval_response(item, f"input[{n}]"))
        elif kind == "mcp_approval_request":
            items.append(_approval_request(item, f"input[{n}]"))
        else:
            raise invalid(f"input[{n}].type", f"Input items of type {kind!r} are not supported.")
    if not items:
        raise invalid("input", "The input is empty.", "empty_input")
    return items


def _function_call_output(item: dict[str, Any], param: str) -> dict[str, Any]:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{param}.call_id", "A function_call_output needs the call_id it answers.")
    output = item.get("output")
    if isinstance(output, list):
        for m, part in enumerate(output):
            if not isinstance(part, dict) or part.get("type") != "input_text":
                raise invalid(f"{param}.output[{m}]", "Only input_text parts are supported.")
            if not isinstance(part.get("text"), str):
                raise invalid(f"{param}.output[{m}].text", "text must be a string.")
        output = "".join(part["text"] for part in output)
    if not isinstance(output, str):
        raise invalid(f"{param}.output", "output must be a string or a list of input_text parts.")
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _function_call(item: dict[str, Any], param: str) -> dict[str, Any]:
    """A call the model made, sent back as history (the session has it already)."""
    fields = {key: item.get(key) for key in ("call_id", "name", "arguments")}
    for key, value in fields.items():
        if not isinstance(value, str):
            raise invalid(f"{param}.{key}", f"A function_call needs its {key} string.")
    return {"type": "function_call", **fields}


def _approval_response(item: dict[str, Any], param: str) -> dict[str, Any]:
    """A decision on one of the agent's requests (an ``mcp_approval_request`` item)."""
    request_id = item.get("approval_request_id")
    if not isinstance(request_id, str) or not request_id:
        raise invalid(
            f"{param}.approval_request_id",
            "An mcp_approval_response needs the approval_request_id it answers.",
        )
    approve = item.get("approve")
    if not isinstance(approve, bool):
        raise invalid(f"{param}.approve", "approve must be true or false.")
    reason, item_id = item.get("reason"), item.get("id")
    if reason is not None and not isinstance(reason, str):
        raise invalid(f"{param}.reason", "reason must be a string.")
    if item_id is not None and not isinstance(item_id, str):
        raise invalid(f"{param}.id", "id must be a string.")
    decision: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": request_id,
        "approve": approve,
        "reason": reason,
    }
    return decision | ({"id": item_id} if item_id else {})


def _approval_request(item: dict[str, Any], param: str) -> dict[str, Any]:
    """A request the agent made, sent back as history (the session has it already)."""
    fields = {key: item.get(key) for key in ("id", "name", "arguments", "server_label")}
    for key, value in fields.items():
        if not isinstance(value, str):
            raise invalid(f"{param}.{key}", f"An mcp_approval_request needs its {key} string.")
    return {"type": "mcp_approval_request", **fields}


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

    Only the user's words make the message; an assistant message or a function
    call in the input is history the session already has, system or developer
    text is the session's prompt, and function outputs are the calls' results
    (``tool_results``). An input of function outputs or decisions alone has no text.
    """
    text = "\n\n".join(user_texts(items)).strip()
    if not text and not tool_results(items) and not approval_responses(items):
        raise invalid("input", "The input has no user text.", "empty_input")
    size = len(text) + sum(len(result["output"]) for result in tool_results(items))
    if size > MAX_INPUT_CHARS or "\x00" in text:
        raise invalid("input", f"The input must be text under {MAX_INPUT_CHARS} characters.")
    return text


def user_texts(items: list[dict[str, Any]]) -> list[str]:
    """The input's user texts that are not blank, in order."""
    return [
        part["text"]
        for item in items
        if item["type"] == "message" and item["role"] == "user"
        for part in item["content"]
        if part["text"].strip()
    ]


def tool_results(items: list[dict[str, Any]]) -> list[ClientToolResult]:
    """The input's function outputs, as answers to the model's calls."""
    return [
        {"tool_call_id": item["call_id"], "output": item["output"]}
        for item in items
        if item["type"] == "function_call_output"
    ]


def posts_message(items: list[dict[str, Any]]) -> bool:
    """Whether the input is a message to the agent: user text, or function outputs.

    An input of decisions alone (``mcp_approval_response``) posts none: what the
    agent hears of them is their consequence (the job's end, the answer).
    """
    if not approval_responses(items):
        return True  # any other input was checked to be a message when it was posted
    return bool(user_texts(items)) or bool(tool_results(items))


def approval_responses(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input's decisions on the agent's requests, in order."""
    return [item for item in items if item["type"] == "mcp_approval_response"]


def function_tools(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's tools, each a function tool in the Response's shape.

    Any other type of tool (``web_search``, ``file_search``, ``mcp``, …) is refused:
    agentsite's own tools are its hosted tools, and a tool the model is told of but
    cannot use would mislead it.
    """
    tools: list[dict[str, Any]] = []
    for n, tool in enumerate(raw):
        param = f"tools[{n}]"
        kind = tool.get("type")
        if kind != "function":
            raise invalid(
                f"{param}.type",
                f"Tools of type {kind!r} are not supported: only function tools"
                " (type 'function'), which the client carries out.",
                "unsupported_value",
            )
        name, description = tool.get("name"), tool.get("description")
        parameters, strict = tool.get("parameters"), tool.get("strict")
        if not isinstance(name, str):
            raise invalid(f"{param}.name", "A function tool needs a name.")
        if description is not None and not isinstance(description, str):
            raise invalid(f"{param}.description", "description must be a string.")
        if parameters is not None and not isinstance(parameters, dict):
            raise invalid(f"{param}.parameters", "parameters must be a JSON schema object.")
        if strict is not None and not isinstance(strict, bool):
            raise invalid(f"{param}.strict", "strict must be a boolean.")
        tools.append(
            {
                "type": "function",
                "name": name,
                "description": description,
                "parameters": parameters,
                "strict": strict,
            }
        )
    return tools


def client_tools(tools: list[dict[str, Any]]) -> list[ClientTool]:
    """Function tools as the tools a session's message declares."""
    return [
        {
            "name": tool["name"],
            "description": tool["description"] or "",
            "input_schema": tool["parameters"] or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


def system_text(items: list[dict[str, Any]]) -> str:
    return "\n\n".join(
        part["text"]
        for item in items
        if item["type"] == "message" and item["role"] in ("system", "developer")
        for part in item["content"]
    )
