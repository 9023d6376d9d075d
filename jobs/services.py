"""Starting and reading jobs: validation, idempotency, ownership, lists.

Status transitions live in ``jobs.lifecycle``, how a job is told in
``jobs.documents``. Starting a job follows Stripe's idempotency rules: the key is bound to the
owner and to a hash of the request. The same request again returns the same
job; another request with the key is refused; concurrent starts race on a
unique constraint, so exactly one job is created.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from accounts.quotas import BUSY_RETRY_AFTER_S, Quota, quota_exceeded, quota_limit, quota_lock
from agentsite.compat.django import CompiledQuery
from agentsite.core.batches import Budget, retention_budget, rows_update
from agentsite.core.errors import BadRequest, Invalid, NotFound, QuotaExceeded
from agentsite.core.ids import is_id
from jobs import hooks, lifecycle
from jobs.models import IDEMPOTENCY_KEY_MAX_LENGTH, MAX_DEPENDENCIES, Job
from jobs.registry import Tool, get_tool
from jobs.retention import job_not_found_message
from jobs.webhooks import callback_url_check

# --- starting jobs -------------------------------------------------------------------


def tool_for_request(name: str, *, kind: str) -> Tool:
    tool = get_tool(name)
    if tool is None:
        raise Invalid("unknown_tool", f"There is no tool named {name!r}.")
    if tool.kind != kind:
        code = "tool_is_blocking" if tool.kind == "blocking" else "tool_is_async"
        verb = "is called inline, not started as a job" if kind == "async" else "runs as a job"
        raise Invalid(code, f"The tool {name!r} {verb}.")
    return tool


def tool_args_validate(tool: Tool, args: Any) -> dict[str, Any]:
    """Arguments checked against the tool's schema, normalised to JSON."""
    return tool_args_parse(tool, args).model_dump(mode="json")


def tool_args_parse(tool: Tool, args: Any) -> BaseModel:
    if not isinstance(args, dict):
        raise Invalid("invalid_arguments", "'args' must be a JSON object.")
    try:
        parsed = tool.validate(args)
    except ValidationError as exc:
        details = [
            {"loc": list(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()
        ]
        raise Invalid(
            "invalid_arguments",
            f"The arguments do not match the input schema of {tool.name!r}.",
            details,
        ) from exc
    return parsed


def request_hash(payload: dict[str, Any]) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def job_create(
    *,
    owner: Any,
    tool: str,
    args: dict[str, Any],
    idempotency_key: str,
    session_id: str | None = None,
    run_id: str | None = None,
    depends_on: Sequence[str] = (),
    timeout_s: float | None = None,
    callback_url: str = "",
    gate: str = "",
) -> tuple[Job, bool]:
    """Start an async tool as a job, or return the job this key already started.

    Returns ``(job, created)``. Raises a ``DomainError`` for anything invalid,
    including ``idempotency_key_reused`` (``Invalid``) for the key with another request.

    ``gate``: the job waits behind it (an approval's id) until ``lifecycle.job_ungate``
    opens it. A gated job may also be a blocking tool's call: once approved it runs
    in a tool worker like any job, since nobody is waiting inline for it.
    """
    key = (idempotency_key or "").strip()
    if not key:
        raise BadRequest(
            "idempotency_key_required", "Send an Idempotency-Key header to start a job."
        )
    if len(idempotency_key) > IDEMPOTENCY_KEY_MAX_LENGTH:
        raise BadRequest("idempotency_key_invalid", "The Idempotency-Key is too long.")
    spec = get_tool(tool) if gate else None
    if spec is None:
        spec = tool_for_request(tool, kind="async")
    clean_args = tool_args_validate(spec, args)
    timeout = timeout_validate(spec, timeout_s)
    deps = dependencies_validate(owner, depends_on)
    session_validate(owner, session_id)
    if callback_url:
        callback_url_check(callback_url)
    fingerprint = request_hash(
        {
            "tool": tool,
            "args": clean_args,
            "session_id": session_id,
            "run_id": run_id,
            "depends_on": sorted(deps),
            "timeout_s": timeout,
            "callback_url": callback_url,
            "gate": gate,
        }
    )
    fields = {
        "owner": owner,
        "tool": tool,
        "args": clean_args,
        "session_id": session_id,
        "run_id": run_id,
        "timeout_s": timeout,
        "callback_url": callback_url,
        "idempotency_key": key,
        "request_hash": fingerprint,
        "gate": gate,
    }
    limit = quota_limit(user_id=owner.pk, quota=Quota.LIVE_JOBS)
    # Insert first: a new key (the usual case) costs no lookup, and the unique
    # constraint decides between concurrent requests with one key.
    for _ in range(2):
        try:
            with transaction.atomic():
                live_jobs_check(owner, limit)
                job = lifecycle.job_queue(
                    depends_on=deps,
                    idempotency_expires_at=timezone.now()
                    + timedelta(seconds=settings.AGENTSITE_IDEMPOTENCY_TTL_S),
                    **fields,
                )
            return job, True
        except QuotaExceeded:
            # A repeat of a request already accepted starts nothing: it is answered.
            existing = job_for_key(owner, key, fingerprint)
            if existing is not None:
                return existing, False
            raise
        except IntegrityError as exc:
            error = exc
            # The key is taken: by this same request (a repeat), by another request
            # (refused), or by a job whose key expired (released: insert again).
            existing = job_for_key(owner, key, fingerprint)
            if existing is not None:
                return existing, False
    raise error


def live_jobs_check(owner: Any, limit: int | None) -> None:
    """Refuse a new job while the owner has ``limit`` jobs queued or running.

    A job behind a gate (waiting for its approval) is not counted: the pending
    approvals have a limit of their own.
    """
    if limit is None:
        return
    quota_lock(user_id=owner.pk, quota=Quota.LIVE_JOBS)
    live = Job.objects.filter(
        owner=owner, status__in=[Job.Status.QUEUED, Job.Status.RUNNING], gate=""
    )
    if live.count() >= limit:
        raise quota_exceeded(Quota.LIVE_JOBS, limit, retry_after_s=BUSY_RETRY_AFTER_S)


def job_for_key(owner: Any, key: str, fingerprint: str) -> Job | None:
    """The live job bound to ``key``; releases the key first when it has expired."""
    job = Job.objects.filter(owner=owner, idempotency_key=key).first()
    if job is None:
        return None
    expires = job.idempotency_expires_at
    if expires is not None and expires <= timezone.now():
        Job.objects.filter(pk=job.pk, idempotency_key=key).update(idempotency_key=None)
        return None
    if job.request_hash != fingerprint:
        raise Invalid(
            "idempotency_key_reused",
            "This Idempotency-Key was already used with a different request.",
            {"job_id": job.id},
        )
    return job


def timeout_validate(tool: Tool, timeout_s: float | None) -> float:
    if timeout_s is None:
        return float(tool.default_timeout_s)
    if not timeout_s > 0 or timeout_s > tool.max_timeout_s:
        raise Invalid(
            "invalid_timeout",
            f"timeout_s must be above 0 and at most {tool.max_timeout_s:g} for {tool.name!r}.",
            {"max_timeout_s": tool.max_timeout_s},
        )
    return float(timeout_s)


def dependencies_validate(owner: Any, depends_on: Sequence[str]) -> list[str]:
    if isinstance(depends_on, str) or not isinstance(depends_on, Sequence):
        raise Invalid("bad_dependency", "depends_on must be a list of job ids.")
    if len(depends_on) > MAX_DEPENDENCIES:
        raise Invalid("bad_dependency", f"A job may depend on at most {MAX_DEPENDENCIES} jobs.")
    ids = list(dict.fromkeys(depends_on))
    if not ids:
        return ids
    malformed = [i for i in ids if not is_id("job", i)]
    found = set(
        Job.objects.filter(owner=owner, id__in=[i for i in ids if i not in malformed]).values_list(
            "id", flat=True
        )
    )
    unknown = [i for i in ids if i not in found]
    if unknown:
        raise Invalid(
            "bad_dependency", "depends_on names jobs that do not exist.", {"job_ids": unknown}
        )
    return ids


def session_validate(owner: Any, session_id: str | None) -> None:
    """A job may be started in one of the owner's live sessions (asked through ``jobs.hooks``)."""
    if session_id is None:
        return
    if not is_id("ses", session_id) or not hooks.session_is_live(
        owner=owner, session_id=session_id
    ):
        raise Invalid("unknown_session", "session_id does not name one of your sessions.")


def job_retry(*, job: Job) -> Job:
    """Start the same request again as a new job (a fresh idempotency key)."""
    new, _ = job_create(
        owner=job.owner,
        tool=job.tool,
        args=job.args,
        idempotency_key=f"retry-of-{job.id}-{timezone.now().timestamp()}",
        session_id=job.session_id,
        depends_on=[],
        timeout_s=job.timeout_s,
        callback_url=job.callback_url,
    )
    return new


# --- reading jobs ---------------------------------------------------------------------


def job_get(*, owner: Any, job_id: str) -> Job:
    """The owner's job; ``NotFound`` for anyone else's, unknown or malformed ids.

    The one ownership rule for jobs: the REST API, MCP, the agent's toolbox and
    the job pages all look a job up through it.
    """
    if not is_id("job", job_id) or owner.pk is None:
        raise NotFound(job_not_found_message())
    job = _OWNED_JOB.one_or_none(job_id=job_id, owner_id=owner.pk)
    if job is None:
        raise NotFound(job_not_found_message())
    return job


# Every look at a job (a status poll, say) asks this: compiled once.
_OWNED_JOB: CompiledQuery[Job] = CompiledQuery(
    lambda job_id, owner_id: Job.objects.filter(id=job_id, owner_id=owner_id),
    job_id=str,
    owner_id=int,
)


def job_list(
    *,
    owner: Any,
    status: str | None = None,
    tool: str | None = None,
    session_id: str | None = None,
) -> QuerySet[Job]:
    jobs = Job.objects.filter(owner=owner).order_by("-created_at", "-id")
    if (tool and "\x00" in tool) or (session_id and not is_id("ses", session_id)):
        return jobs.none()  # names nothing (and PostgreSQL takes no NUL in a query)
    if status:
        jobs = jobs.filter(status=status)
    if tool:
        jobs = jobs.filter(tool=tool)
    if session_id:
        jobs = jobs.filter(session_id=session_id)
    return jobs


# --- housekeeping ---------------------------------------------------------------------


def idempotency_keys_expire(*, budget: Budget | None = None) -> int:
    """Release Idempotency-Keys past their time to live, so they may be used again.

    A batch per statement (``job_key_expiry_idx``); keys past the budget wait for the
    next pass, and a key asked for meanwhile is released on the spot (``job_for_key``).
    """
    expired = Job.objects.filter(
        idempotency_key__isnull=False, idempotency_expires_at__lt=timezone.now()
    )
    return rows_update(expired, budget or retention_budget(), idempotency_key=None)[0]
