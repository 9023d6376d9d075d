"""Tools a client declares and carries out itself.

A user message may bring tools of its sender's own (``ClientTool``: a name, a
description and a JSON schema, the Messages API's shape). A run offers the
model, beside agentsite's tools, the client tools of its triggers: a user
message's own, and for a job's event those of the run that started the job,
so the turn that reports on a job can still call them. The run fixes them when
it claims its batch (``Run.client_tools``, set by ``sessions.runs.run_start``).

When the model calls one, the call is logged as a ``tool_call`` marked
``client`` and the turn ends there: nothing runs it on the server. The client
answers with a later message carrying ``tool_results``; a call awaits its
answer until one message gives it, and that message's turn hands it to the
model as the call's result (``sessions.conversation``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from agentsite.core.errors import Invalid
from sessions.models import Event, Run
from sessions.payloads import ClientTool, ClientToolResult, JobEventPayload, UserMessagePayload
from sessions.tool_catalog import tool_definitions

# What the model APIs accept as a tool name.
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TOOLS = 128


def server_tool_names() -> set[str]:
    """The names agentsite's own tools are offered under (a client tool may not take one)."""
    return {tool["name"] for tool in tool_definitions()}


def client_tools_check(tools: list[ClientTool]) -> None:
    """Refuse tools a model could not be offered; ``details["index"]`` names the tool."""
    if len(tools) > MAX_TOOLS:
        raise Invalid("too_many_tools", f"At most {MAX_TOOLS} tools.", details={"index": MAX_TOOLS})
    taken = server_tool_names()
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        name = tool["name"]
        if not NAME.fullmatch(name):
            raise Invalid(
                "invalid_tool_name",
                f"The tool name {name!r} must be 1 to 64 letters, digits, '_' or '-'.",
                details={"index": index},
            )
        if name in taken:
            raise Invalid(
                "tool_name_taken",
                f"{name!r} is the name of one of agentsite's own tools; choose another.",
                details={"index": index},
            )
        if name in seen:
            raise Invalid(
                "duplicate_tool_name", f"Two tools are named {name!r}.", details={"index": index}
            )
        seen.add(name)
        _schema_check(tool, index)


def _schema_check(tool: ClientTool, index: int) -> None:
    schema = tool["input_schema"]
    problem = "" if schema.get("type") == "object" else "it must describe an object"
    if not problem:
        try:
            validator_for(schema, default=Draft202012Validator).check_schema(schema)
        except SchemaError as exc:
            problem = f"it is not a JSON schema ({exc.message})"
    if problem:
        raise Invalid(
            "invalid_tool_schema",
            f"The input schema of {tool['name']!r} is refused: {problem}.",
            details={"index": index},
        )


def client_calls_awaiting(*, session_id: str) -> set[str]:
    """The ids of the session's client tool calls that no message has answered yet."""
    calls = Event.objects.filter(
        session_id=session_id, kind=Event.Kind.TOOL_CALL, payload__client=True
    ).values_list("seq", "payload")
    first = {str(payload["id"]): seq for seq, payload in calls}
    if not first:
        return set()
    answers = Event.objects.filter(
        session_id=session_id,
        kind=Event.Kind.USER_MESSAGE,
        seq__gt=min(first.values()),
        payload__has_key="tool_results",
    ).values_list("payload", flat=True)
    answered = {result["tool_call_id"] for payload in answers for result in _results(payload)}
    return set(first) - answered


def tool_results_check(*, session_id: str, results: list[ClientToolResult]) -> None:
    """Refuse an answer to no awaiting call (unknown, already answered, or twice in one
    message); ``details["tool_call_id"]`` names it. Call with the session locked."""
    awaiting = client_calls_awaiting(session_id=session_id)
    for result in results:
        call_id = result["tool_call_id"]
        if call_id not in awaiting:
            raise Invalid(
                "unknown_tool_call",
                f"No call {call_id!r} of a client tool awaits an answer in this session.",
                details={"tool_call_id": call_id},
            )
        awaiting.discard(call_id)


def client_tools_of(batch: Iterable[Event]) -> list[ClientTool]:
    """The client tools a run with this batch offers: those its messages declare, and
    those of the runs that started the jobs whose events it takes."""
    events = list(batch)
    job_ids = [
        cast(JobEventPayload, e.payload).get("job_id")
        for e in events
        if e.kind == Event.Kind.JOB_EVENT
    ]
    tools: dict[str, ClientTool] = {}
    if job_ids:
        starters = Run.objects.filter(jobs__id__in=job_ids).distinct().order_by("created_at")
        for inherited in starters.values_list("client_tools", flat=True):
            tools.update((tool["name"], tool) for tool in inherited or [])
    for event in events:
        if event.kind == Event.Kind.USER_MESSAGE:
            declared = cast(UserMessagePayload, event.payload).get("client_tools", [])
            tools.update((tool["name"], tool) for tool in declared)
    return list(tools.values())


def tools_offered(client_tools: list[ClientTool]) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """Every tool the model is offered, and the names of those the client carries out.

    A client tool never shadows one of agentsite's (a tool added since it was declared).
    """
    own = tool_definitions()
    taken = {tool["name"] for tool in own}
    theirs = [tool for tool in client_tools if tool["name"] not in taken]
    return [*own, *(dict(tool) for tool in theirs)], frozenset(tool["name"] for tool in theirs)


def _results(payload: Any) -> list[ClientToolResult]:
    if not isinstance(payload, dict):
        return []
    return cast(UserMessagePayload, payload).get("tool_results", [])
