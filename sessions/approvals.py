"""Requests for a user's answer: every change of ``Approval.status``, and the policy.

An agent's tool call that needs approval (``approval_needed``) becomes a job
behind a *gate* and a pending request (``approval_request_call``); the turn
gets a short "waiting for approval" result and goes on. A question
(``ask_user``) is a pending request with the JSON schema of its answer. Either
waits as a row and nothing else: no worker, turn, thread or socket holds it.

``pending → approved | edited | rejected | answered | expired | cancelled``;
each transition is a compare-and-set (``UPDATE … WHERE status = 'pending' AND
expires_at > now``), so of two decisions at once exactly one wins and the other
is told the winning one. In the transition's transaction:

- approved / edited: the job's gate opens (with the edited arguments, checked
  against the tool's schema as the model's were); its completion reaches the
  agent later, as every job's does;
- rejected / expired / cancelled: the job is cancelled with the reason, and its
  ``job_cancelled`` event tells the agent;
- a question's answer (or its refusal, or its expiry) enters the inbox and wakes
  the agent.

Each transition appends ``approval_requested`` / ``approval_decided`` to the
session's log (so every stream carries it, resumable) and sends the
``approval.requested`` / ``approval.decided`` webhook, committed first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Literal

import jsonschema
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from accounts.quotas import Quota, quota_exceeded, quota_limit, quota_lock
from agentsite.core.errors import BadRequest, Conflict, Invalid, NotFound
from agentsite.core.ids import is_id
from jobs import services as job_services
from jobs.lifecycle import JobTransitionError, job_cancel, job_ungate
from jobs.models import Job
from jobs.registry import Tool, get_tool
from sessions.events import event_append
from sessions.inbox import inbox_append_locked
from sessions.models import AgentSession, Approval, Event, ToolApprovalRule
from sessions.payloads import ApprovalPayload
from sessions.runs import session_lock
from sessions.webhooks import session_webhook_send

log = logging.getLogger(__name__)

S = Approval.Status
Decision = Literal["approve", "reject", "edit", "answer"]
DECISIONS: dict[str, str] = {
    "approve": S.APPROVED,
    "edit": S.EDITED,
    "reject": S.REJECTED,
    "answer": S.ANSWERED,
}
ALLOWED = {
    Approval.Kind.APPROVAL: {"approve", "edit", "reject"},
    Approval.Kind.QUESTION: {"answer", "reject"},
}
REASON_MAX_CHARS = 2000
QUESTION_MAX_CHARS = 4000
# A question without a schema is answered with text.
TEXT_ANSWER: dict[str, Any] = {"type": "string"}
# How often the scheduler expires requests past their time, and how many per pass.
EXPIRY_SWEEP_S = 30
EXPIRY_BATCH = 200


class ApprovalNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("No such approval request.")


# --- policy ---------------------------------------------------------------------------


def approval_rule(*, owner_id: int, tool: Tool) -> tuple[str, bool]:
    """The mode of ``tool`` for its agents' calls, and whether an operator set it.

    An admin's rule for the user wins, then ``AGENTSITE_TOOL_APPROVALS``, then the
    tool's own declaration (which is no operator's choice).
    """
    rule = (
        ToolApprovalRule.objects.filter(user_id=owner_id, tool=tool.name)
        .values_list("mode", flat=True)
        .first()
    )
    if rule is not None:
        return str(rule), True
    configured = settings.AGENTSITE_TOOL_APPROVALS.get(tool.name)
    if configured is not None:
        return configured, True
    return tool.approval, False


def approval_needed(*, session: AgentSession, tool: Tool) -> bool:
    """Whether an agent's call of ``tool`` in ``session`` waits for its owner's approval."""
    mode, by_operator = approval_rule(owner_id=session.owner_id, tool=tool)
    if mode == "never":
        return False
    return by_operator or tool.name not in session.allowed_tools


# --- documents ------------------------------------------------------------------------


def approval_doc(approval: Approval) -> ApprovalPayload:
    decided_by = approval.decided_by.get_username() if approval.decided_by else None
    return {
        "id": approval.id,
        "kind": approval.kind,
        "status": approval.status,
        "session_id": approval.session_id,
        "run_id": approval.run_id,
        "tool_call_id": approval.tool_call_id,
        "tool": approval.tool,
        "arguments": approval.arguments,
        "question": approval.question,
        "answer_schema": approval.answer_schema,
        "job_id": approval.job_id or None,
        "reason": approval.reason,
        "edited_arguments": approval.edited_arguments,
        "answer": approval.answer,
        "decided_by": decided_by,
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "expires_at": approval.expires_at.isoformat(),
        "created_at": approval.created_at.isoformat(),
    }


def waiting_result(approval: Approval) -> dict[str, Any]:
    """What the model is told at once: the shape of a started job, or of a question asked."""
    if approval.kind == Approval.Kind.QUESTION:
        return {
            "request_id": approval.id,
            "status": "awaiting_answer",
            "note": "The user's answer arrives later as an event; carry on meanwhile.",
        }
    return {
        "job_id": approval.job_id,
        "status": "awaiting_approval",
        "approval_id": approval.id,
        "note": (
            "The job starts once the user approves it; its result, or the user's refusal, "
            "arrives later as an event. Carry on meanwhile."
        ),
    }


# --- asking ---------------------------------------------------------------------------


def approval_request_call(
    *,
    session: AgentSession,
    run_id: str,
    call_id: str,
    tool: Tool,
    args: dict[str, Any],
    depends_on: Sequence[str] = (),
) -> dict[str, Any]:
    """Hold an agent's call of ``tool`` for approval: its job, gated, and the request.

    The arguments are checked now, as an ungated call's are. A turn handed back and
    run again gets the request it made the first time.
    """
    clean = job_services.tool_args_validate(tool, args)

    def gate_its_job(approval: Approval) -> None:
        job, _ = job_services.job_create(
            owner=session.owner,
            tool=tool.name,
            args=clean,
            depends_on=depends_on,
            idempotency_key=f"approval:{approval.id}",
            session_id=session.id,
            run_id=run_id,
            gate=approval.id,
        )
        Approval.objects.filter(pk=approval.pk).update(job_id=job.id)
        approval.job_id = job.id

    return _ask_once(
        session=session,
        run_id=run_id,
        call_id=call_id,
        with_request=gate_its_job,
        kind=Approval.Kind.APPROVAL,
        tool=tool.name,
        arguments=clean,
    )


def question_ask(
    *,
    session: AgentSession,
    run_id: str,
    call_id: str,
    question: str,
    answer_schema: dict[str, Any] | None,
) -> dict[str, Any]:
    """Ask the session's owner ``question``; the answer, JSON that meets ``answer_schema``,
    enters the conversation later."""
    question = question.strip()
    if not question or len(question) > QUESTION_MAX_CHARS:
        raise Invalid(
            "invalid_arguments", f"The question must be 1 to {QUESTION_MAX_CHARS} characters."
        )
    schema = answer_schema or TEXT_ANSWER
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise Invalid(
            "invalid_arguments", f"answer_schema is not a JSON schema: {exc.message}"
        ) from exc
    return _ask_once(
        session=session,
        run_id=run_id,
        call_id=call_id,
        kind=Approval.Kind.QUESTION,
        question=question,
        answer_schema=schema,
    )


def _ask_once(
    *,
    session: AgentSession,
    run_id: str,
    call_id: str,
    with_request: Callable[[Approval], None] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A pending request for the call (and ``with_request`` in its transaction), or the one
    this call made already: a turn handed back and run again asks once."""
    existing = _request_for_call(session, run_id, call_id)
    if existing is not None:
        return waiting_result(existing)
    try:
        with transaction.atomic():
            approval = _request_create(session=session, run_id=run_id, call_id=call_id, **fields)
            if with_request is not None:
                with_request(approval)
            _requested(approval)
    except IntegrityError:
        existing = _request_for_call(session, run_id, call_id)
        if existing is None:
            raise
        return waiting_result(existing)
    return waiting_result(approval)


def _request_for_call(session: AgentSession, run_id: str, call_id: str) -> Approval | None:
    return Approval.objects.filter(session=session, run_id=run_id, tool_call_id=call_id).first()


def _request_create(*, session: AgentSession, run_id: str, call_id: str, **fields: Any) -> Approval:
    """A pending request, within the owner's limit of them (inside the caller's transaction)."""
    limit = quota_limit(user_id=session.owner_id, quota=Quota.PENDING_APPROVALS)
    if limit is not None:
        quota_lock(user_id=session.owner_id, quota=Quota.PENDING_APPROVALS)
        pending = Approval.objects.filter(owner_id=session.owner_id, status=S.PENDING).count()
        if pending >= limit:
            raise quota_exceeded(Quota.PENDING_APPROVALS, limit, retry_after_s=60)
    approval = Approval.objects.create(
        owner_id=session.owner_id,
        session=session,
        run_id=run_id,
        tool_call_id=call_id,
        expires_at=timezone.now() + timedelta(seconds=settings.AGENTSITE_APPROVAL_TTL_S),
        **fields,
    )
    AgentSession.objects.filter(pk=session.pk).update(pending_approvals=F("pending_approvals") + 1)
    return approval


def _requested(approval: Approval) -> None:
    doc = approval_doc(approval)
    event_append(session_id=approval.session_id, kind=Event.Kind.APPROVAL_REQUESTED, payload=doc)
    _webhook(approval.session_id, "approval.requested", doc)


# --- deciding -------------------------------------------------------------------------


def approval_decide(
    *,
    approval: Approval,
    by: Any,
    decision: str,
    reason: str = "",
    arguments: dict[str, Any] | None = None,
    answer: Any = None,
    allow_for_session: bool = False,
    key: str = "",
) -> Approval:
    """Decide a pending request as ``by`` (its owner, or staff in the admin).

    ``Conflict``: ``expired`` past its time, ``already_decided`` (with the winning
    decision) once decided — unless this is the same decision sent again with the
    same ``key``, which is answered with the request as it stands.
    """
    target, fields = _decision_fields(approval, decision, reason, arguments, answer)
    if allow_for_session:
        _allow_check(approval, decision)
    fields |= {"decided_by_id": by.pk, "decided_at": timezone.now(), "decision_key": key[:200]}
    with transaction.atomic():
        session = _lock(approval.job_id, approval.session_id)
        won = _compare_and_set(approval.id, target, fields)
        if won is not None:
            _decided(won, session=session)
            if allow_for_session and won.tool not in session.allowed_tools:
                AgentSession.objects.filter(pk=session.pk).update(
                    allowed_tools=[*session.allowed_tools, won.tool]
                )
    return won if won is not None else _lost(approval.id, key)


def _decision_fields(
    approval: Approval, decision: str, reason: str, arguments: Any, answer: Any
) -> tuple[str, dict[str, Any]]:
    if decision not in DECISIONS:
        raise Invalid("invalid_decision", "decision must be approve, edit, reject or answer.")
    if decision not in ALLOWED[Approval.Kind(approval.kind)]:
        allowed = " or ".join(sorted(ALLOWED[Approval.Kind(approval.kind)]))
        raise Invalid(
            "invalid_decision",
            f"A request of kind {approval.kind} takes {allowed}, not {decision}.",
        )
    reason = (reason or "").strip()
    if len(reason) > REASON_MAX_CHARS:
        raise Invalid("invalid_reason", f"reason is at most {REASON_MAX_CHARS} characters.")
    fields: dict[str, Any] = {"reason": reason}
    if decision == "edit":
        if arguments is None:
            raise Invalid("arguments_required", "An edit sends the call's new arguments.")
        tool = get_tool(approval.tool)
        if tool is None:
            raise Invalid("unknown_tool", f"There is no tool named {approval.tool!r} any more.")
        fields["edited_arguments"] = job_services.tool_args_validate(tool, arguments)
    elif arguments is not None:
        raise Invalid("invalid_decision", "Only an edit takes arguments.")
    if decision == "answer":
        try:
            jsonschema.validate(answer, approval.answer_schema or TEXT_ANSWER)
        except jsonschema.ValidationError as exc:
            raise Invalid(
                "invalid_answer", f"The answer does not meet the question's schema: {exc.message}"
            ) from exc
        fields["answer"] = answer
    elif answer is not None:
        raise Invalid("invalid_decision", "Only an answer takes answer.")
    return DECISIONS[decision], fields


def _allow_check(approval: Approval, decision: str) -> None:
    if decision not in ("approve", "edit") or approval.kind != Approval.Kind.APPROVAL:
        raise Invalid(
            "invalid_decision", "Only approving a tool call may allow the tool for the session."
        )
    tool = get_tool(approval.tool)
    if tool is not None and approval_rule(owner_id=approval.owner_id, tool=tool) == (
        "always",
        True,
    ):
        raise Invalid(
            "allow_refused",
            f"Every call of {approval.tool} needs approval here (an operator's rule); "
            "approve this call alone.",
        )


def _compare_and_set(approval_id: str, target: str, fields: dict[str, Any]) -> Approval | None:
    changed = Approval.objects.filter(
        pk=approval_id, status=S.PENDING, expires_at__gt=timezone.now()
    ).update(status=target, **fields)
    if changed != 1:
        return None
    return Approval.objects.select_related("decided_by").get(pk=approval_id)


def _lost(approval_id: str, key: str) -> Approval:
    """Why a decision did not take: expired now, or decided already (maybe by this request)."""
    current = Approval.objects.select_related("decided_by").get(pk=approval_id)
    if current.is_pending:  # past its time, not yet swept
        approval_expire(approval_id=approval_id)
        current.refresh_from_db()
    if current.status == S.EXPIRED:
        raise Conflict(
            "expired", "This request expired before it was decided.", approval_doc(current)
        )
    if key and current.decision_key == key:
        return current
    raise Conflict(
        "already_decided",
        f"This request was already decided: {current.status}.",
        approval_doc(current),
    )


def _lock(job_id: str, session_id: str) -> AgentSession:
    """Lock a request's job, then its session, in the order a job's own end takes them
    (its row, then its session's through ``job_publish``): no two transactions wait on
    each other."""
    if job_id:
        list(Job.objects.select_for_update().filter(pk=job_id).values_list("pk", flat=True))
    return session_lock(session_id)


def _decided(approval: Approval, *, session: AgentSession) -> None:
    """The consequences of a decision, in its transaction (``session`` is locked)."""
    AgentSession.objects.filter(pk=session.pk, pending_approvals__gt=0).update(
        pending_approvals=F("pending_approvals") - 1
    )
    doc = approval_doc(approval)
    if approval.kind == Approval.Kind.QUESTION:
        if session.deleted_at is None:
            inbox_append_locked(
                session=session, kind=Event.Kind.APPROVAL_DECIDED, payload=dict(doc)
            )
        else:
            event_append(session_id=session.pk, kind=Event.Kind.APPROVAL_DECIDED, payload=doc)
    else:
        event_append(session_id=session.pk, kind=Event.Kind.APPROVAL_DECIDED, payload=doc)
        _job_follow(approval)
    _webhook(session.pk, "approval.decided", doc)


def _job_follow(approval: Approval) -> None:
    """Open the job's gate, or cancel the job with the reason; the job's own event tells
    the agent. A job already ended (its user cancelled it) is left as it is."""
    if not approval.job_id:
        return
    try:
        if approval.status in (S.APPROVED, S.EDITED):
            job_ungate(job_id=approval.job_id, gate=approval.id, args=approval.edited_arguments)
        else:
            job_cancel(
                job_id=approval.job_id,
                code=f"approval_{approval.status}",
                message=_refusal(approval),
            )
    except JobTransitionError:
        log.info("job %s of %s no longer waits for it", approval.job_id, approval.id)


def _refusal(approval: Approval) -> str:
    if approval.status == S.REJECTED:
        who = approval.decided_by.get_username() if approval.decided_by else "the user"
        return f"Not approved by {who}" + (f": {approval.reason}" if approval.reason else ".")
    if approval.status == S.EXPIRED:
        return "Nobody approved it in time: the request expired."
    return "The request was cancelled" + (f": {approval.reason}" if approval.reason else ".")


def approval_expire(*, approval_id: str) -> Approval | None:
    """A pending request past its time ends ``expired``; None if it was decided meanwhile."""
    with transaction.atomic():
        job_id, session_id = (
            Approval.objects.filter(pk=approval_id).values_list("job_id", "session_id").get()
        )
        session = _lock(job_id, session_id)
        changed = Approval.objects.filter(
            pk=approval_id, status=S.PENDING, expires_at__lte=timezone.now()
        ).update(status=S.EXPIRED, decided_at=timezone.now())
        if changed != 1:
            return None
        approval = Approval.objects.get(pk=approval_id)
        _decided(approval, session=session)
    return approval


def approval_cancel(*, approval_id: str, reason: str) -> Approval | None:
    """A pending request whose session or job is gone ends ``cancelled``."""
    with transaction.atomic():
        job_id, session_id = (
            Approval.objects.filter(pk=approval_id).values_list("job_id", "session_id").get()
        )
        session = _lock(job_id, session_id)
        changed = Approval.objects.filter(pk=approval_id, status=S.PENDING).update(
            status=S.CANCELLED, decided_at=timezone.now(), reason=reason
        )
        if changed != 1:
            return None
        approval = Approval.objects.get(pk=approval_id)
        _decided(approval, session=session)
    return approval


def approvals_expire() -> int:
    """The scheduler's pass: pending requests past their time, oldest first, bounded."""
    due = Approval.objects.filter(status=S.PENDING, expires_at__lte=timezone.now()).order_by(
        "expires_at"
    )
    return sum(
        approval_expire(approval_id=a) is not None
        for a in due.values_list("id", flat=True)[:EXPIRY_BATCH]
    )


def approvals_cancel_for_session(*, session_id: str) -> int:
    """A deleted session's pending requests end ``cancelled`` (their jobs with them)."""
    pending = Approval.objects.filter(session_id=session_id, status=S.PENDING)
    return sum(
        approval_cancel(approval_id=a, reason="The session was deleted.") is not None
        for a in pending.values_list("id", flat=True)
    )


def approval_job_ended(*, job_id: str) -> None:
    """The job of a pending request ended without a decision (its user cancelled it)."""
    for approval_id in Approval.objects.filter(job_id=job_id, status=S.PENDING).values_list(
        "id", flat=True
    ):
        approval_cancel(approval_id=approval_id, reason=f"Its job {job_id} ended first.")


# --- reading --------------------------------------------------------------------------


def approval_for(*, owner: Any, approval_id: str) -> Approval:
    """The owner's request; ``ApprovalNotFound`` for anyone else's, unknown or malformed ids.

    The one ownership rule for requests: the REST API, the chat and ``/v1`` use it.
    """
    if not is_id("apr", approval_id):
        raise ApprovalNotFound()
    approval = (
        Approval.objects.select_related("decided_by")
        .filter(pk=approval_id, owner_id=owner.pk)
        .first()
    )
    if approval is None:
        raise ApprovalNotFound()
    return approval


def approval_list(
    *, owner: Any, status: str | None = None, session_id: str | None = None, after: str = ""
) -> QuerySet[Approval]:
    """The owner's requests, newest first; ``after`` a request's id: those older than it."""
    approvals = (
        Approval.objects.select_related("decided_by")
        .filter(owner_id=owner.pk)
        .order_by("-created_at", "-id")
    )
    if status:
        if status not in S.values:
            raise Invalid("invalid_status", f"status must be one of {', '.join(S.values)}.")
        approvals = approvals.filter(status=status)
    if session_id:
        approvals = approvals.filter(session_id=session_id)
    if after:
        mark = (
            Approval.objects.filter(pk=after, owner_id=owner.pk).values("created_at", "id").first()
            if is_id("apr", after)
            else None
        )
        if mark is None:
            raise BadRequest("invalid_cursor", "after does not name one of your requests.")
        approvals = approvals.filter(created_at__lte=mark["created_at"]).exclude(
            created_at=mark["created_at"], id__gte=mark["id"]
        )
    return approvals


# --- webhooks -------------------------------------------------------------------------


def _webhook(session_id: str, event_type: str, doc: ApprovalPayload) -> None:
    """The ``approval.*`` webhook to where the owner's session events go, on commit."""
    session_webhook_send(session_id=session_id, event_type=event_type, data=dict(doc))
