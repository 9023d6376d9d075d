"""The vocabulary of a session's log and of its live channel.

One TypedDict per ``Event.Kind`` payload (the ``payload`` column of an event
row, and what every client reads in a frame), and the channel-layer messages
the log publishes and the streams pass between followers. ``dict[str, Any]``
is left only where the content is free-form JSON: a tool's arguments and its
output.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from accounts.credentials import CredentialsChangedMessage

# --- event payloads, by kind -------------------------------------------------------------


class TextPayload(TypedDict):
    """``assistant_delta``."""

    text: str


class ClientTool(TypedDict):
    """A tool the sender of a message carries out itself (``sessions.client_tools``), in
    the Messages API's shape."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ClientToolResult(TypedDict):
    """The sender's answer to a call of one of its tools."""

    tool_call_id: str
    output: str
    is_error: NotRequired[bool]


class UserMessagePayload(TypedDict):
    """``user_message``: the sender's text; the tools it carries out itself, and its
    answers to the model's earlier calls of them."""

    text: str
    client_tools: NotRequired[list[ClientTool]]
    tool_results: NotRequired[list[ClientToolResult]]


class AssistantMessagePayload(TypedDict):
    """``assistant_message``: one model response's text; ``interrupted`` when cut short."""

    text: str
    interrupted: NotRequired[bool]


class ToolCallPayload(TypedDict):
    """``tool_call``: what the model asked for, under the model's own call id; ``client``
    when the call is the client's to carry out (the turn ended waiting for its answer)."""

    id: str
    name: str
    input: dict[str, Any]
    client: NotRequired[bool]


class ToolResultPayload(TypedDict):
    """``tool_result``: the outcome of the call ``tool_call_id``."""

    tool_call_id: str
    name: str
    output: Any
    is_error: bool


class JobProgress(TypedDict):
    fraction: float | None
    message: str


class JobError(TypedDict):
    code: str
    message: str


class JobEventPayload(TypedDict):
    """``job_event``: one transition of a job started in the session (jobs.lifecycle)."""

    event: str
    job_id: str
    tool: str
    status: str
    progress: JobProgress
    summary: str
    error: JobError | None
    partial_count: int


class RunStartedPayload(TypedDict):
    """``run_started``: a run took its batch."""

    run_id: str
    batch_size: int


class ErrorPayload(TypedDict):
    """``error``: why a run failed."""

    code: str
    message: str


class RunFinishedPayload(TypedDict):
    """``run_finished``: the status a run ended in (and its error when it failed)."""

    run_id: str
    status: str
    error: NotRequired[ErrorPayload]


class RunRequeuedPayload(TypedDict):
    """``run_requeued``: a stopping worker handed the run back; what it wrote after
    ``superseded_after_seq`` is superseded by the next attempt."""

    run_id: str
    reason: str
    superseded_after_seq: int


class ApprovalPayload(TypedDict):
    """``approval_requested`` / ``approval_decided``: a request for the user's answer as it
    stands (``sessions.approvals.approval_doc``); the REST API and webhooks send the same."""

    id: str
    kind: str
    status: str
    session_id: str
    run_id: str | None
    tool_call_id: str
    tool: str
    arguments: dict[str, Any]
    question: str
    answer_schema: dict[str, Any]
    job_id: str | None
    reason: str
    edited_arguments: dict[str, Any] | None
    answer: Any
    decided_by: str | None
    decided_at: str | None
    expires_at: str
    created_at: str


EventPayload = (
    TextPayload
    | UserMessagePayload
    | AssistantMessagePayload
    | ToolCallPayload
    | ToolResultPayload
    | JobEventPayload
    | RunStartedPayload
    | RunFinishedPayload
    | RunRequeuedPayload
    | ApprovalPayload
    | ErrorPayload
)
# What lands in the inbox (pending): the user's messages and the jobs' events.
InboxPayload = UserMessagePayload | JobEventPayload | ApprovalPayload


# --- the live channel -----------------------------------------------------------------------


class SessionEventMessage(TypedDict):
    """``session.event``: an event committed to the log, published to the session's group."""

    type: Literal["session.event"]
    seq: int
    kind: str
    payload: EventPayload
    run_id: str | None
    created_at: str


class StreamCheckMessage(TypedDict):
    """``stream.check``: a nudge to re-read the log: the follower's own (idle, a client's
    ping), or its feed's after the subscription reconnected (``agentsite.core.fanout``)."""

    type: Literal["stream.check"]


# ``credentials.changed`` (accounts.credentials) comes from the follower's user's group.
LiveMessage = SessionEventMessage | StreamCheckMessage | CredentialsChangedMessage
