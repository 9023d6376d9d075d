"""Responses over sessions: create one (a user message in a session), read, cancel, delete.

A response is a user message posted to a session, or decisions on the agent's
requests in it (``mcp_approval_response``), plus everything the agent does
about them (``responses.projection`` says which runs and jobs that is); its
status and output are always derived from the session's log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentsite.core.errors import Conflict, Invalid, NotFound
from agentsite.core.ids import is_id
from agentsite.core.queries import get_or_none
from jobs.lifecycle import job_request_cancel
from jobs.models import Job
from responses.models import AgentResponse
from responses.payloads import (
    ResponseCreate,
    approval_responses,
    client_tools,
    function_tools,
    input_items,
    input_text,
    invalid,
    posts_message,
    system_text,
    tool_results,
)
from responses.projection import Header, ResponseProjection
from sessions.approvals import approval_decide, approval_for
from sessions.llm.names import OFFLINE, SCRIPTED, is_anthropic
from sessions.models import AgentSession, Approval, Event, Run
from sessions.runs import run_request_cancel
from sessions.services import SessionNotFound, message_post, model_check, session_create

# Model names a response may ask for; "agentsite" is the server's default model.
DEFAULT_MODEL = "agentsite"
LOG_PAGE = 500


def model_for_session(name: str) -> str:
    """The session model a requested model name means; refuses any other name."""
    name = name.strip()
    if name == DEFAULT_MODEL:
        return ""
    if name in (OFFLINE, SCRIPTED) or is_anthropic(name):
        try:
            model_check(name)
        except Invalid as exc:
            raise invalid("model", exc.message, exc.code) from exc
        return name
    raise invalid(
        "model",
        f"The model {name!r} does not exist here: use {DEFAULT_MODEL!r} (the server's default),"
        " 'offline' or a claude-… model.",
        "model_not_found",
    )


def response_create(
    *, owner: Any, request: ResponseCreate, session: AgentSession | None = None
) -> AgentResponse:
    """Post the input as a user message: to the previous response's session, to
    ``session`` (the owner's, found by the caller), or to a new one.

    The request's function tools go with the message as the client's tools, its
    function outputs as the answers to the model's calls of them. Its decisions
    (``mcp_approval_response``) are taken first, in the previous response's
    session; an input of decisions alone posts no message (the response is then
    what the agent does about their consequences).
    """
    session_model = model_for_session(request.model)
    items = input_items(request.input)
    text = input_text(items)
    tools = function_tools(request.tools)
    answers = tool_results(items)
    decisions = approval_responses(items)
    if answers and not request.previous_response_id:
        raise _unknown_call(items, answers[0]["tool_call_id"])
    if decisions and not request.previous_response_id:
        raise invalid(
            "previous_response_id",
            "An mcp_approval_response decides a request of the previous response's session:"
            " send previous_response_id.",
            "missing_required_parameter",
        )
    instructions = "\n\n".join(t for t in (request.instructions or "", system_text(items)) if t)
    with transaction.atomic():
        if request.previous_response_id:
            previous = _previous(owner, request.previous_response_id)
            session = previous.session
        elif session is None:
            # Titled from its first message by message_post, as every session is.
            session = session_create(owner=owner, model=session_model, system_prompt=instructions)
        # Decisions before the message: each locks its job, then the session (the order a
        # job's own end takes them); the message then finds the session locked already.
        input_seq = _decide(owner=owner, session=session, items=items)
        if posts_message(items):
            try:
                event, _ = message_post(
                    session=session,
                    text=text,
                    client_tools=client_tools(tools),
                    tool_results=answers,
                )
            except SessionNotFound as exc:
                raise invalid(
                    "previous_response_id", "The previous response's session was deleted."
                ) from exc
            except Invalid as exc:
                raise _refused(exc, items) from exc
            input_seq = event.seq if input_seq is None else input_seq
        if input_seq is None:  # no message and no decision: input_text refused it already
            raise invalid("input", "The input has no user text.", "empty_input")
        return AgentResponse.objects.create(
            owner=owner,
            session=session,
            input_seq=input_seq,
            input_items=items,
            model=request.model.strip(),
            instructions=instructions,
            metadata=request.metadata or {},
            tools=tools,
            background=request.background,
            previous_response_id=request.previous_response_id or "",
        )


def _decide(*, owner: Any, session: AgentSession, items: list[dict[str, Any]]) -> int | None:
    """Take the input's decisions, as ``owner``; the seq of the first one's event in the log.

    A request of another session, another user's or an unknown one is a 400 naming
    the item; one decided already, or expired, a ``Conflict``.
    """
    first_seq = None
    for n, item in enumerate(items):
        if item["type"] != "mcp_approval_response":
            continue
        param = f"input[{n}]"
        approval = _request_of(owner, session, item["approval_request_id"], param)
        _decision_take(owner, approval, item, param)
        if first_seq is None:
            first_seq = (
                Event.objects.filter(
                    session_id=session.pk,
                    kind=Event.Kind.APPROVAL_DECIDED,
                    payload__id=approval.id,
                )
                .values_list("seq", flat=True)
                .first()
            )
    return first_seq


def _request_of(owner: Any, session: AgentSession, approval_id: str, param: str) -> Approval:
    approval: Approval | None
    try:
        approval = approval_for(owner=owner, approval_id=approval_id)
    except NotFound:
        approval = None
    if approval is None or approval.session_id != session.pk:
        raise invalid(
            f"{param}.approval_request_id",
            f"No approval request with id {approval_id!r} in this conversation: answer an"
            " mcp_approval_request of the response given as previous_response_id.",
            "unknown_approval_request",
        )
    return approval


def _decision_take(owner: Any, approval: Approval, item: dict[str, Any], param: str) -> None:
    """Approve or reject a tool call; answer or refuse a question (its answer in ``reason``:
    text, or JSON where the question's schema wants something else)."""
    reason = item.get("reason") or ""
    try:
        if not item["approve"]:
            approval_decide(approval=approval, by=owner, decision="reject", reason=reason)
        elif approval.kind == Approval.Kind.APPROVAL:
            approval_decide(approval=approval, by=owner, decision="approve", reason=reason)
        elif not reason.strip():
            raise invalid(
                f"{param}.reason",
                "A question is answered in reason (text, or JSON that meets its answer_schema).",
                "answer_required",
            )
        else:
            _answer(owner, approval, reason)
    except Invalid as exc:
        if isinstance(exc.details, dict) and "param" in exc.details:
            raise
        raise invalid(f"{param}.reason", exc.message, exc.code) from exc
    except Conflict as exc:
        details = {"param": f"{param}.approval_request_id", "request": exc.details}
        raise Conflict(exc.code, exc.message, details) from exc


def _answer(owner: Any, approval: Approval, reason: str) -> None:
    """The answer as the text itself, else as the JSON it holds (a refused answer writes
    nothing, so the second try is a first one)."""
    try:
        approval_decide(approval=approval, by=owner, decision="answer", answer=reason)
    except Invalid as exc:
        try:
            parsed = json.loads(reason)
        except ValueError:
            raise exc from None
        approval_decide(approval=approval, by=owner, decision="answer", answer=parsed)


def _refused(exc: Invalid, items: list[dict[str, Any]]) -> Invalid:
    """A refusal of the message's tools or answers, naming the request's field."""
    details = exc.details if isinstance(exc.details, dict) else {}
    if exc.code == "model_not_allowed":  # the previous response's session's model
        return invalid("model", exc.message, exc.code)
    if "tool_call_id" in details:
        return _unknown_call(items, str(details["tool_call_id"]))
    if "index" in details:
        field = "parameters" if exc.code == "invalid_tool_schema" else "name"
        return invalid(f"tools[{details['index']}].{field}", exc.message, exc.code)
    return exc


def _unknown_call(items: list[dict[str, Any]], call_id: str) -> Invalid:
    n = next(
        n
        for n, item in enumerate(items)
        if item["type"] == "function_call_output" and item["call_id"] == call_id
    )
    return invalid(
        f"input[{n}].call_id",
        f"No function call with call_id {call_id!r} awaits its output: answer a function_call"
        " of the response given as previous_response_id.",
        "unknown_call_id",
    )


def _previous(owner: Any, response_id: str) -> AgentResponse:
    try:
        return response_get(owner=owner, response_id=response_id)
    except NotFound as exc:
        raise invalid(
            "previous_response_id", f"Previous response with id {response_id!r} not found."
        ) from exc


def response_get(*, owner: Any, response_id: str) -> AgentResponse:
    """The owner's response; anyone else's, a deleted or unknown one, and one whose
    session its owner deleted, are not found."""
    found = None
    if is_id("resp", response_id):
        found = get_or_none(
            AgentResponse.objects.select_related("session").filter(
                pk=response_id,
                owner_id=owner.pk,
                deleted_at__isnull=True,
                session__deleted_at__isnull=True,
            )
        )
    if found is None:
        raise NotFound(f"No response with id {response_id!r}.", details={"param": "response_id"})
    return found


def response_delete(*, response: AgentResponse) -> None:
    """Forget the response; what of it still runs is asked to stop (its session stays)."""
    response_cancel_step(response_id=response.id)
    AgentResponse.objects.filter(pk=response.pk).update(deleted_at=timezone.now())


def response_input_items(
    *, response: AgentResponse, order: str = "desc", limit: int = 20, after: str = ""
) -> dict[str, Any]:
    """The input items as a page, OpenAI's list shape (newest first unless ``order=asc``)."""
    items = [
        {"id": f"msg_{response.id[5:]}_in{n}", **item}
        for n, item in enumerate(response.input_items)
    ]
    if order == "desc":
        items.reverse()
    if after:
        ids = [item["id"] for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > len(page),
    }


# --- the derived response ------------------------------------------------------------------


class LogFacts:
    """The database facts the projection asks for."""

    def batch_seqs(self, run_id: str) -> set[int]:
        return set(Event.objects.filter(consumed_by_id=run_id).values_list("seq", flat=True))

    def job_run(self, job_id: str) -> str | None:
        return get_or_none(Job.objects.filter(pk=job_id).values_list("run_id", flat=True))

    def usage(self, run_ids: Iterable[str]) -> dict[str, int]:
        total = {"input_tokens": 0, "output_tokens": 0}
        for usage in Run.objects.filter(pk__in=list(run_ids)).values_list("usage", flat=True):
            for key in total:
                total[key] += int((usage or {}).get(key, 0))
        return total

    def cancel_seq(self, response_id: str) -> int | None:
        return get_or_none(
            AgentResponse.objects.filter(pk=response_id).values_list("cancel_seq", flat=True)
        )


def projection_start(response: AgentResponse) -> ResponseProjection:
    """A projection of ``response`` that has read nothing of the log yet."""
    header = Header(
        id=response.id,
        created_at=int(response.created_at.timestamp()),
        model=response.model,
        instructions=response.instructions or None,
        metadata=response.metadata,
        background=response.background,
        previous_response_id=response.previous_response_id or None,
        input_seq=response.input_seq,
        cancel_seq=response.cancel_seq,
        tools=response.tools,
        posts_message=posts_message(response.input_items),
        decides=tuple(d["approval_request_id"] for d in approval_responses(response.input_items)),
    )
    return ResponseProjection(header=header, facts=LogFacts())


def response_project(response: AgentResponse) -> ResponseProjection:
    """The response as the log has it now."""
    projection = projection_start(response)
    after = response.input_seq - 1
    while not projection.ended:
        rows = list(
            Event.objects.filter(session_id=response.session_id, seq__gt=after)
            .order_by("seq")
            .values("seq", "kind", "payload", "run_id")[:LOG_PAGE]
        )
        for row in rows:
            projection.feed(dict(row))
            after = row["seq"]
        if len(rows) < LOG_PAGE:
            break
    projection.caught_up(after)
    return projection


def response_document(response: AgentResponse) -> dict[str, Any]:
    return response_project(response).response()


# --- cancelling ------------------------------------------------------------------------------


def response_cancel_step(*, response_id: str) -> ResponseProjection:
    """One step of a cancel: mark it (once), then stop whatever of it still runs.

    Called again until the projection has ended: a running turn may start a
    job after the previous step looked.
    """
    response = AgentResponse.objects.select_related("session").get(pk=response_id)
    projection = response_project(response)
    if projection.ended:
        return projection
    if response.cancel_seq is None:
        last_seq = AgentSession.objects.filter(pk=response.session_id).values_list(
            "last_seq", flat=True
        )[0]
        AgentResponse.objects.filter(pk=response.pk, cancel_seq__isnull=True).update(
            cancel_seq=last_seq
        )
        response.refresh_from_db(fields=["cancel_seq"])
        projection = response_project(response)
    for run_id in projection.open_runs:
        run_request_cancel(run_id=run_id)
    if projection.triggers:
        # What still waits in the inbox would start a turn for this response.
        queued = Run.objects.filter(session_id=response.session_id, status=Run.Status.QUEUED)
        for run_id in queued.values_list("id", flat=True):
            run_request_cancel(run_id=run_id)
    for job_id in projection.live_jobs:
        job_request_cancel(job_id=job_id)
    return projection
