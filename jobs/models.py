from __future__ import annotations

from django.conf import settings
from django.db import models

from agentsite.core.ids import new_job_id

# Limits of a start request, shared by its validation and the API's document of it.
MAX_DEPENDENCIES = 20
IDEMPOTENCY_KEY_MAX_LENGTH = 255
# The longest address a user may give webhooks (a job's, a session's, the user's own).
CALLBACK_URL_MAX_LENGTH = 2000


class Job(models.Model):
    """One async tool call. ``jobs.lifecycle`` is the only writer of ``status``."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        TIMED_OUT = "timed_out"

    TERMINAL = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT})

    id = models.CharField(primary_key=True, max_length=40, default=new_job_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    session = models.ForeignKey(
        "agent_sessions.AgentSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        db_index=False,  # job_session_created_idx starts with it
    )
    run = models.ForeignKey(
        "agent_sessions.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    tool = models.CharField(max_length=100)
    args = models.JSONField(default=dict)
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.QUEUED, editable=False
    )
    progress_fraction = models.FloatField(null=True, blank=True, editable=False)
    progress_message = models.CharField(max_length=300, blank=True, editable=False)
    result = models.JSONField(null=True, blank=True, editable=False)
    # How many partial results (JobChunk rows) the job has; kept by lifecycle.job_partial.
    partial_count = models.PositiveIntegerField(default=0, editable=False)
    error_code = models.CharField(max_length=50, blank=True, editable=False)
    error_message = models.TextField(blank=True, editable=False)
    # NULL, not "", once released: the unique constraint only covers live keys.
    idempotency_key = models.CharField(max_length=IDEMPOTENCY_KEY_MAX_LENGTH, null=True, blank=True)  # noqa: DJ001
    request_hash = models.CharField(max_length=64, blank=True)
    idempotency_expires_at = models.DateTimeField(null=True, blank=True)
    depends_on = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="dependents"
    )
    # The ids in depends_on, sorted: a copy written once with the job, so reading a
    # job's status never needs the join table.
    dependency_ids = models.JSONField(default=list, blank=True, editable=False)
    # Some job depends on this one: set when such a job is created, so a job that
    # ends looks for dependents to release only when there can be any.
    has_dependents = models.BooleanField(default=False, editable=False)
    timeout_s = models.FloatField()
    deadline = models.DateTimeField(null=True, blank=True, editable=False)
    callback_url = models.URLField(max_length=CALLBACK_URL_MAX_LENGTH, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    heartbeat_at = models.DateTimeField(null=True, blank=True, editable=False)
    worker_name = models.CharField(max_length=200, blank=True, editable=False)
    # When nothing was left to wait for (at once, or when the last dependency was
    # done): from then on the job is held for a free slot (jobs.dispatch).
    ready_at = models.DateTimeField(null=True, blank=True, editable=False)
    # What the job waits for besides its dependencies (an approval's id): it is not
    # ready, whatever its dependencies, until the gate is opened (lifecycle.job_ungate).
    gate = models.CharField(max_length=40, blank=True, editable=False)
    # When jobs.dispatch handed the job to RQ (it takes a slot until it ends);
    # cleared if RQ lost it before a worker started it, which holds it again.
    enqueued_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True, editable=False)
    finished_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "job"
        verbose_name_plural = "jobs"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="job_owner_idempotency_key_unique",
            )
        ]
        indexes = [
            # An owner's newest-first list (the job list API), in its own order; and
            # the same list filtered by status, by tool, by session: without them a
            # filter that matches few jobs reads all of the owner's to fill a page.
            models.Index(fields=["owner", "-created_at", "-id"], name="job_owner_created_idx"),
            models.Index(
                fields=["owner", "status", "-created_at", "-id"], name="job_owner_status_idx"
            ),
            models.Index(fields=["owner", "tool", "-created_at", "-id"], name="job_owner_tool_idx"),
            # Also a session's jobs, for the retention of sessions (sessions.retention).
            models.Index(fields=["session", "-created_at", "-id"], name="job_session_created_idx"),
            # The admin's and the sweep's newest-first lists over every owner, and the
            # admin's list filtered by status or by tool.
            models.Index(fields=["-created_at", "-id"], name="job_created_idx"),
            models.Index(fields=["status", "-created_at", "-id"], name="job_status_created_idx"),
            models.Index(fields=["tool", "-created_at", "-id"], name="job_tool_created_idx"),
            models.Index(fields=["status", "heartbeat_at"]),
            # /metrics adds the jobs finished since its last scrape (agentsite.ops.metrics);
            # retention finds the oldest finished jobs (jobs.retention).
            models.Index(fields=["finished_at"], name="job_finished_at_idx"),
            # jobs.dispatch: the held jobs, oldest first.
            models.Index(
                fields=["ready_at", "id"],
                condition=models.Q(
                    status="queued", enqueued_at__isnull=True, ready_at__isnull=False
                ),
                name="job_held_idx",
            ),
            # jobs.dispatch: the owners with held jobs, and each one's oldest.
            models.Index(
                fields=["owner", "ready_at", "id"],
                condition=models.Q(
                    status="queued", enqueued_at__isnull=True, ready_at__isnull=False
                ),
                name="job_held_owner_idx",
            ),
            # jobs.dispatch: when an owner was last served (its latest hand-over).
            models.Index(
                fields=["owner", "enqueued_at"],
                condition=models.Q(enqueued_at__isnull=False),
                name="job_served_idx",
            ),
            # jobs.dispatch: the jobs that hold a slot, counted per owner.
            models.Index(
                fields=["owner"],
                condition=models.Q(status__in=["queued", "running"], enqueued_at__isnull=False),
                name="job_in_flight_idx",
            ),
            # An owner's live jobs, counted against the live-jobs quota (accounts.quotas).
            models.Index(
                fields=["owner"],
                condition=models.Q(status__in=["queued", "running"]),
                name="job_live_owner_idx",
            ),
            # The sweep releases expired Idempotency-Keys: only rows holding one.
            models.Index(
                fields=["idempotency_expires_at"],
                condition=models.Q(idempotency_key__isnull=False),
                name="job_key_expiry_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.tool} {self.status}"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class JobChunk(models.Model):
    """A partial result; ``index`` is dense per job and is the result cursor."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    item = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "partial result"
        verbose_name_plural = "partial results"
        ordering = ["job", "index"]
        constraints = [
            models.UniqueConstraint(fields=["job", "index"], name="jobchunk_job_index_unique")
        ]

    def __str__(self) -> str:
        return f"{self.job_id}[{self.index}]"


class JobEvent(models.Model):
    """The job's own log: one row per transition, whether or not it has a session."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    event = models.CharField(max_length=30)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "job event"
        verbose_name_plural = "job events"
        ordering = ["job", "id"]

    def __str__(self) -> str:
        return f"{self.job_id} {self.event}"


class WebhookSecret(models.Model):
    """A user's webhook settings: the signing secret of every delivery (``whsec_…``)
    and where the user's events go when the thing they are about names no address.

    A job's callback goes to its own ``callback_url`` only; a session's events go to
    the session's ``callback_url``, else to this one (``sessions.webhooks``).
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_secret"
    )
    secret = models.CharField(max_length=100)
    callback_url = models.URLField(
        max_length=CALLBACK_URL_MAX_LENGTH,
        blank=True,
        help_text="Where the user's session events go by default.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "webhook secret"
        verbose_name_plural = "webhook secrets"

    def __str__(self) -> str:
        return f"webhook secret of {self.user_id}"


class WebhookDelivery(models.Model):
    """One callback message to one user's address, signed with that user's secret:
    a job's final status (``job`` set) or another event of the user's (a session's);
    retried until delivered or given up."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_deliveries"
    )
    # The body's "type": a job's final event ("job_completed"…) or another ("approval.requested").
    event_type = models.CharField(max_length=100)
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.CASCADE, related_name="webhook_deliveries"
    )
    # The webhook-id header: the same for every attempt, so receivers can deduplicate.
    message_id = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=2000)
    payload = models.JSONField()
    # Headers the receiver asked to be sent with each attempt, beside the signature's
    # (an A2A client's notification token and credentials).
    headers = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"]),
            # Retention finds the oldest deliveries of no job (jobs.retention); a
            # job's go with the job.
            models.Index(
                fields=["created_at"],
                condition=models.Q(job__isnull=True),
                name="webhook_jobless_created_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.message_id


class WebhookAttempt(models.Model):
    """One HTTP POST of a delivery and what came back."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_rows"
    )
    number = models.PositiveIntegerField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "webhook attempt"
        verbose_name_plural = "webhook attempts"
        ordering = ["delivery", "number"]

    def __str__(self) -> str:
        return f"{self.delivery_id}#{self.number}"

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
