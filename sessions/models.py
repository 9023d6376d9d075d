from __future__ import annotations

from django.conf import settings
from django.db import models

from agentsite.core.ids import new_id, new_run_id, new_session_id
from jobs.models import CALLBACK_URL_MAX_LENGTH


class AgentSession(models.Model):
    """One agent conversation, owned by a user."""

    class State(models.TextChoices):
        IDLE = "idle"
        RUNNING = "running"

    id = models.CharField(primary_key=True, max_length=40, default=new_session_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions"
    )
    title = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=100, blank=True, help_text="Empty: AGENTSITE_MODEL.")
    system_prompt = models.TextField(blank=True)
    # Where this session's events are posted as signed webhooks; empty: the owner's
    # address (sessions.webhooks).
    callback_url = models.URLField(max_length=CALLBACK_URL_MAX_LENGTH, blank=True)
    last_seq = models.PositiveBigIntegerField(default=0, editable=False)
    # The last seq the owner has looked at in the browser (for "new since your visit").
    seen_seq = models.PositiveBigIntegerField(default=0, editable=False)
    state = models.CharField(
        max_length=10, choices=State.choices, default=State.IDLE, editable=False
    )
    # Tools its owner allowed for the rest of the session when approving a call
    # (sessions.approvals); never where an operator said "always".
    allowed_tools = models.JSONField(default=list, blank=True, editable=False)
    # How many of its requests for approval and questions wait for the owner.
    pending_approvals = models.PositiveIntegerField(default=0, editable=False)
    # Whether an app above sessions watches its log (sessions.log_watch: A2A, while a
    # task of the session has push notification configurations). Read where each event
    # takes its seq, so the events of a session nobody watches cost the watchers nothing.
    watched = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "session"
        verbose_name_plural = "sessions"
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"]),
            # Retention finds the sessions deleted longest ago (sessions.retention).
            models.Index(
                fields=["deleted_at"],
                condition=models.Q(deleted_at__isnull=False),
                name="session_deleted_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.id

    @staticmethod
    def group_prefix() -> str:
        return f"{settings.REDIS_PREFIX}.session."

    @property
    def group_name(self) -> str:
        """The channel-layer group that carries this session's live events."""
        return f"{self.group_prefix()}{self.id}"


class Event(models.Model):
    """An append-only log entry; ``(session, seq)`` is unique and seq is dense.

    Inbox kinds (user messages, job events) are appended with ``pending=True``;
    the run that takes them as its batch clears the flag and records itself in
    ``consumed_by`` in the same transaction.
    """

    class Kind(models.TextChoices):
        USER_MESSAGE = "user_message"
        ASSISTANT_DELTA = "assistant_delta"
        ASSISTANT_MESSAGE = "assistant_message"
        TOOL_CALL = "tool_call"
        TOOL_RESULT = "tool_result"
        JOB_EVENT = "job_event"
        RUN_STARTED = "run_started"
        RUN_FINISHED = "run_finished"
        RUN_REQUEUED = "run_requeued"
        APPROVAL_REQUESTED = "approval_requested"
        APPROVAL_DECIDED = "approval_decided"
        ERROR = "error"

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField(editable=False)
    kind = models.CharField(max_length=30, choices=Kind.choices)
    payload = models.JSONField(default=dict)
    pending = models.BooleanField(default=False)
    run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="produced_events"
    )
    consumed_by = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="batch_events"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "log event"
        verbose_name_plural = "log events"
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="event_session_seq_unique")
        ]
        indexes = [
            models.Index(
                fields=["session", "seq"],
                condition=models.Q(pending=True),
                name="event_pending_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.kind}"


class Run(models.Model):
    """One background model turn over a batch of pending events."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})

    id = models.CharField(primary_key=True, max_length=40, default=new_run_id, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="runs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs"
    )
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.QUEUED, editable=False
    )
    batch_size = models.PositiveIntegerField(default=0, editable=False)
    # The log position the run started from; its stream is every event after it.
    start_seq = models.PositiveBigIntegerField(default=0, editable=False)
    usage = models.JSONField(default=dict, blank=True, editable=False)
    # The tools its triggers' senders carry out themselves, fixed when it claims its
    # batch (sessions.client_tools).
    client_tools = models.JSONField(default=list, blank=True, editable=False)
    error = models.TextField(blank=True, editable=False)
    cancel_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True, editable=False)
    first_token_at = models.DateTimeField(null=True, blank=True, editable=False)
    finished_at = models.DateTimeField(null=True, blank=True, editable=False)
    heartbeat_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "run"
        verbose_name_plural = "runs"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["session", "status"]),
            # /metrics adds the runs finished since its last scrape (agentsite.ops.metrics).
            models.Index(fields=["finished_at"], name="run_finished_at_idx"),
            # An owner's live runs, counted against the live-turns quota (accounts.quotas).
            models.Index(
                fields=["owner"],
                condition=models.Q(status__in=["queued", "running"]),
                name="run_live_owner_idx",
            ),
            # The reaper reads only queued and running runs (sessions.runs.runs_reap).
            # Not a partial index: SQLite does not use one (run_live_owner_idx
            # included) for a single status; PostgreSQL may take either.
            models.Index(fields=["status", "created_at"], name="run_status_created_idx"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def time_to_first_token_ms(self) -> float | None:
        if self.started_at and self.first_token_at:
            return (self.first_token_at - self.started_at).total_seconds() * 1000
        return None

    @property
    def decision_ms(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds() * 1000
        return None


def new_approval_id() -> str:
    return new_id("apr")


class Approval(models.Model):
    """A request for its user's answer, made by an agent in a model turn.

    ``approval``: a tool call that waits behind its job's gate for approve, edit
    or reject. ``question``: an ``ask_user`` call, answered with JSON that meets
    its schema. It waits holding nothing but this row; every change of its status
    goes through ``sessions.approvals``.
    """

    class Kind(models.TextChoices):
        APPROVAL = "approval"
        QUESTION = "question"

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        EDITED = "edited"
        REJECTED = "rejected"
        ANSWERED = "answered"
        EXPIRED = "expired"
        CANCELLED = "cancelled"

    TERMINAL = frozenset(set(Status) - {Status.PENDING})

    id = models.CharField(primary_key=True, max_length=40, default=new_approval_id, editable=False)
    kind = models.CharField(max_length=10, choices=Kind.choices, editable=False)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, editable=False
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approvals"
    )
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="approvals")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="approvals"
    )
    tool_call_id = models.CharField(max_length=100, editable=False)
    # The tool and the arguments the agent asked for (approval); the question and
    # the JSON schema of its answer (question).
    tool = models.CharField(max_length=100, blank=True, editable=False)
    arguments = models.JSONField(default=dict, blank=True, editable=False)
    question = models.TextField(blank=True, editable=False)
    answer_schema = models.JSONField(default=dict, blank=True, editable=False)
    # The job that runs the call once approved, created behind this request's gate.
    job_id = models.CharField(max_length=40, blank=True, editable=False)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="approvals_decided",
        editable=False,
    )
    decided_at = models.DateTimeField(null=True, blank=True, editable=False)
    reason = models.TextField(blank=True, editable=False)
    edited_arguments = models.JSONField(null=True, blank=True, editable=False)
    answer = models.JSONField(null=True, blank=True, editable=False)
    # The decision's Idempotency-Key: the same decision sent again is answered, not refused.
    decision_key = models.CharField(max_length=200, blank=True, editable=False)
    expires_at = models.DateTimeField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "approval request"
        verbose_name_plural = "approval requests"
        ordering = ["-created_at", "-id"]
        constraints = [
            # A turn handed back and run again asks once per tool call.
            models.UniqueConstraint(
                fields=["session", "run", "tool_call_id"], name="approval_call_unique"
            )
        ]
        indexes = [
            # An owner's list, newest first, and the same filtered by status.
            models.Index(fields=["owner", "-created_at", "-id"], name="approval_owner_idx"),
            models.Index(
                fields=["owner", "status", "-created_at", "-id"], name="approval_owner_status_idx"
            ),
            # The expiry pass reads the pending requests past their time.
            models.Index(
                fields=["expires_at"],
                condition=models.Q(status="pending"),
                name="approval_pending_expiry_idx",
            ),
            models.Index(fields=["status", "-created_at"], name="approval_status_created_idx"),
            # A job that ends while its request is pending (sessions.approvals).
            models.Index(
                fields=["job_id"], condition=models.Q(status="pending"), name="approval_job_idx"
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING


class ToolApprovalRule(models.Model):
    """An operator's rule for one user and one tool: its agents' calls need approval, or not."""

    class Mode(models.TextChoices):
        NEVER = "never", "never ask"
        ALWAYS = "always", "always ask"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tool_approval_rules"
    )
    tool = models.CharField(max_length=100)
    mode = models.CharField(max_length=10, choices=Mode.choices)

    class Meta:
        verbose_name = "tool approval rule"
        verbose_name_plural = "tool approval rules"
        constraints = [
            models.UniqueConstraint(fields=["user", "tool"], name="tool_approval_rule_unique")
        ]

    def __str__(self) -> str:
        return f"{self.tool}: {self.mode} for {self.user}"
