"""Beside a running tool, in its work horse: the heartbeat, the stop watch, the forced stop.

The horse runs the tool in its main thread and this watch beside it, which

- writes ``Job.heartbeat_at``, and the job's key in Redis that says it is alive
  (the scheduler fails jobs whose heartbeat goes stale and whose key has expired:
  the worker was lost; ``jobs.alive``),
- polls the Redis cancel key and the deadline, so ``ctx.cancelled`` turns true
  within a second,
- flushes throttled progress, and
- when the tool has not stopped a grace period after being told to, records
  the final state (``cancelled`` / ``timed_out``) and has RQ stop the horse
  (its stop-job command), so a tool that swallows every exception still ends.

A database restart costs a beat, never the job: progress and heartbeats are
written at the next beat.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from django.conf import settings
from django.db import connections
from django.utils import timezone
from rq.command import send_stop_job_command

from agentsite.core.database import DATABASE_AWAY
from jobs import lifecycle
from jobs.alive import alive_mark
from jobs.groups import cancel_key
from jobs.lifecycle import JobTransitionError
from jobs.live import redis_connection
from jobs.tools.context import JobToolContext, StopReason

log = logging.getLogger(__name__)

CANCEL_POLL_S = 0.2


class Heartbeat(threading.Thread):
    """Beside the tool: cancel and deadline watch and forced stop, plus a beat thread.

    The database writes (heartbeat, throttled progress) run in a thread of their
    own, so a slow or locked database never delays noticing a cancel request.
    That thread starts when the first beat is due (the start recorded one), so
    a job shorter than a beat costs one thread, not two.
    """

    def __init__(self, ctx: JobToolContext) -> None:
        super().__init__(name=f"watch-{ctx.job_id}", daemon=True)
        self.ctx = ctx
        self.finished = threading.Event()
        self.stop_signalled_at: float | None = None
        self.forced = False
        self.beat: threading.Thread | None = None
        self.alive_due = 0.0

    def alive_mark(self) -> None:
        """The job's key in Redis (``jobs.alive``), from this thread, which needs no
        database: so a database outage, or a database write that hangs, does not
        silence it."""
        self.alive_due = time.monotonic() + settings.AGENTSITE_JOB_HEARTBEAT_S
        alive_mark("job", [self.ctx._job_id], settings.AGENTSITE_JOB_HEARTBEAT_STALE_S)

    def run(self) -> None:
        first_beat_at = time.monotonic() + settings.AGENTSITE_JOB_HEARTBEAT_S
        failing = False
        try:
            while not self.finished.wait(CANCEL_POLL_S):
                if self.beat is None and time.monotonic() >= first_beat_at:
                    self.beat = threading.Thread(
                        target=self.beat_loop, name=f"beat-{self.ctx.job_id}", daemon=True
                    )
                    self.beat.start()
                if self.beat is not None and time.monotonic() >= self.alive_due:
                    self.alive_mark()
                try:
                    self.watch()
                    failing = False
                except Exception:  # Redis away for a moment: look again at the next poll
                    if not failing:
                        log.exception("watch of %s failed", self.ctx.job_id)
                    failing = True
        finally:
            if self.beat is not None:
                self.beat.join(timeout=5)
            connections.close_all()

    def beat_loop(self) -> None:
        away = False
        try:
            while True:
                try:
                    self.ctx.progress_flush()
                    if not lifecycle.job_heartbeat(job_id=self.ctx._job_id):
                        self.ctx.signal_stop(StopReason.CANCEL)  # it ended elsewhere (swept)
                    away = False
                except DATABASE_AWAY as exc:
                    # A database restart: beat again, on a new connection, next time.
                    if not away:
                        log.warning(
                            "heartbeat of %s: database unavailable (%s)", self.ctx.job_id, exc
                        )
                    away = True
                    connections.close_all()
                if self.finished.wait(settings.AGENTSITE_JOB_HEARTBEAT_S):
                    break
        except Exception:
            log.exception("heartbeat of %s failed", self.ctx.job_id)
        finally:
            connections.close_all()

    def watch(self) -> None:
        ctx = self.ctx
        if not ctx.cancelled:
            # The client is made at the first poll: a job done sooner never needs it.
            if redis_connection().exists(cancel_key(ctx._job_id)):
                ctx.signal_stop(StopReason.CANCEL)
            elif ctx.deadline is not None and timezone.now() >= ctx.deadline:
                ctx.signal_stop(StopReason.DEADLINE)
            if ctx.cancelled:
                self.stop_signalled_at = time.monotonic()
                ctx.logger.info("job %s told to stop (%s)", ctx.job_id, ctx.stop_reason)
            return
        if self.stop_signalled_at is None or self.forced:
            return
        if time.monotonic() - self.stop_signalled_at >= settings.AGENTSITE_JOB_STOP_GRACE_S:
            self.forced = True
            self.force_stop()

    def force_stop(self) -> None:
        """The tool ignored the signal: record the final state, then have RQ kill this horse."""
        ctx = self.ctx
        grace = settings.AGENTSITE_JOB_STOP_GRACE_S
        try:
            if ctx.stop_reason == StopReason.DEADLINE:
                lifecycle.job_time_out(
                    job_id=ctx._job_id,
                    message=f"Still running {grace:g}s after its deadline; stopped.",
                )
            else:
                lifecycle.job_cancel(
                    job_id=ctx._job_id,
                    message=f"Did not stop within {grace:g}s of the cancel request; stopped.",
                )
        except JobTransitionError:
            return  # it finished first; that is the truth
        connections.close_all()
        stop_horse(ctx._job_id)


def stop_horse(job_id: str) -> None:
    """RQ's stop-job command; this process exits by itself if no worker acts on it."""
    try:
        send_stop_job_command(redis_connection(), job_id)
    except Exception:
        log.warning("stop-job command for %s failed", job_id, exc_info=True)
    if os.environ.get("RQ_JOB_ID") == job_id:
        time.sleep(5)
        os._exit(1)
