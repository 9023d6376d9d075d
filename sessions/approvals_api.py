"""The approvals REST API (``/api/approvals``): the user's requests, and their decisions.

A request is answered once: of two decisions at once one wins and the other gets
``409 already_decided`` with the winning one; past its time ``409 expired``. The
same decision sent again with the same ``Idempotency-Key`` is answered with the
request as it stands.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from agentsite.web.auth import request_user
from agentsite.web.http import Body, errors
from sessions.approvals import approval_decide, approval_doc, approval_for, approval_list
from sessions.models import Approval
from sessions.payloads import ApprovalPayload

router = Router(tags=["approvals"])

IDEMPOTENCY_KEY_MAX = 200

ApprovalKind = Literal["approval", "question"]
ApprovalState = Literal[
    "pending", "approved", "edited", "rejected", "answered", "expired", "cancelled"
]


class ApprovalDoc(Schema):
    id: str
    kind: ApprovalKind
    status: ApprovalState
    session_id: str
    run_id: str | None
    tool_call_id: str
    tool: str = Field(description="The tool the agent wants to call (an approval).")
    arguments: dict[str, Any] = Field(description="The arguments it asked for.")
    question: str = Field(description="What the agent asks (a question).")
    answer_schema: dict[str, Any] = Field(description="The JSON schema of the answer.")
    job_id: str | None = Field(description="The job that runs the call once approved.")
    reason: str
    edited_arguments: dict[str, Any] | None
    answer: Any = None
    decided_by: str | None
    decided_at: str | None
    expires_at: str
    created_at: str


class ApprovalPage(Schema):
    data: list[ApprovalDoc]
    next_after: str | None = Field(
        description="Pass as `after` for the next page; null on the last one."
    )


class ApprovalsQuery(Schema):
    status: ApprovalState | None = None
    session_id: str | None = Field(default=None, max_length=40)
    after: str = Field(default="", max_length=40, description="A request id from a page.")
    limit: int = Field(default=50, ge=1, le=200)


class DecisionIn(Body):
    decision: Literal["approve", "reject", "edit", "answer"]
    reason: str = Field(default="", max_length=2000)
    arguments: dict[str, Any] | None = Field(
        default=None, description="An edit's arguments, checked against the tool's schema."
    )
    answer: Any = Field(default=None, description="A question's answer, meeting its schema.")
    allow_for_session: bool = Field(
        default=False,
        description="With approve or edit: later calls of this tool in this session need no "
        "approval (refused where an operator requires it for every call).",
    )


DECISION_OPENAPI: dict[str, Any] = {
    "parameters": [
        {
            "in": "header",
            "name": "Idempotency-Key",
            "required": False,
            "description": "The same decision sent again with the same key is answered, "
            "not refused as already decided.",
            "schema": {"type": "string", "maxLength": IDEMPOTENCY_KEY_MAX},
        }
    ]
}


@router.get(
    "/approvals",
    response={200: ApprovalPage, **errors(400, 422)},
    summary="Your requests for approval and questions, newest first",
)
def approvals_list(request: HttpRequest, query: Query[ApprovalsQuery]) -> dict[str, Any]:
    approvals = approval_list(
        owner=request_user(request),
        status=query.status,
        session_id=query.session_id,
        after=query.after,
    )
    page = list(approvals[: query.limit + 1])
    more = len(page) > query.limit
    page = page[: query.limit]
    return {
        "data": [approval_doc(a) for a in page],
        "next_after": page[-1].id if more and page else None,
    }


@router.get(
    "/approvals/{approval_id}",
    response={200: ApprovalDoc, **errors(404)},
    summary="One request",
)
def approval_get(request: HttpRequest, approval_id: str) -> ApprovalPayload:
    return approval_doc(approval_for(owner=request_user(request), approval_id=approval_id))


@router.post(
    "/approvals/{approval_id}/decision",
    response={200: ApprovalDoc, **errors(400, 404, 409, 422)},
    summary="Approve, edit or reject a tool call; answer or decline a question",
    description="`409 already_decided` (the winning decision in `details`) once decided, "
    "`409 expired` past `expires_at`.",
    openapi_extra=DECISION_OPENAPI,
)
def approval_decision(request: HttpRequest, approval_id: str, body: DecisionIn) -> ApprovalPayload:
    user = request_user(request)
    approval: Approval = approval_for(owner=user, approval_id=approval_id)
    decided = approval_decide(
        approval=approval,
        by=user,
        decision=body.decision,
        reason=body.reason,
        arguments=body.arguments,
        answer=body.answer,
        allow_for_session=body.allow_for_session,
        key=request.headers.get("Idempotency-Key", "")[:IDEMPOTENCY_KEY_MAX],
    )
    return approval_doc(decided)
