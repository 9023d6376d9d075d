"""``manage.py scheduler``: runs agentsite's periodic passes (``agentsite.cron``).

Each pass runs here, on a thread of the scheduler's own, at its interval: the
job sweep, the run reaper, expiry, retention, the A2A push sweep. They are
agentsite's own bounded passes over the database; handing each to a worker as
an RQ job cost more than the pass (about 4.4 ms of CPU a job in RQ's enqueue,
dequeue and bookkeeping against 1.6 to 1.9 ms for an idle sweep or reap, up to
three times in five seconds), and a pass here needs no worker to be free.

- A pass runs at most once at a time: one still running when it is due again
  is skipped until its next turn, and the others keep their pace.
- A pass that raises is logged and runs again at its next turn.
- A thread keeps its database connection from one pass to the next unless an
  error occurred on it (``connections_keep_if_sound``).
- A deployment runs exactly one scheduler (docs/operations.md).

It is registered with RQ's cron registry and keeps its heartbeat there (what
``/healthz`` reads), and it outlives a Redis outage: it waits for Redis with
backoff and goes on, and runs no pass while its heartbeat cannot be written
(most of them need Redis).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import django_rq
from django.core.management.base import BaseCommand
from django_rq.cron import DjangoCronScheduler
from rq.exceptions import StopRequested

from agentsite.compat import rq as rq_internals
from agentsite.core import telemetry
from agentsite.core.database import connections_keep_if_sound
from agentsite.core.periodic import PeriodicTask
from agentsite.core.workers import OUTAGE_BACKOFF_MAX_S, REDIS_DOWN

log = logging.getLogger(__name__)

# The longest sleep between two looks at the passes (and two heartbeats).
BEAT_S = 5.0


@dataclasses.dataclass
class Pass:
    func: Callable[[], Any]
    interval_s: float
    due_at: float = 0.0  # time.monotonic(); 0: at once
    running: bool = False

    @property
    def name(self) -> str:
        return f"{self.func.__module__}.{self.func.__name__}"


class Scheduler(DjangoCronScheduler):
    def __init__(self, passes: list[PeriodicTask], **kwargs: Any) -> None:
        super().__init__(connection=django_rq.get_connection("default"), **kwargs)
        self.passes = [Pass(func, float(interval)) for func, interval in passes]
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max(1, len(self.passes)), thread_name_prefix="pass"
        )
        self.lock = threading.Lock()

    def start(self) -> None:
        rq_internals.install_signal_handlers(self)
        registered = False
        wait = 0.5
        try:
            while True:
                try:
                    if not registered:
                        self.register_birth()
                        registered = True
                    self.heartbeat()
                    if wait > 0.5:  # it had failed: Redis is back
                        telemetry.reconnect_count("redis")
                    wait = 0.5
                    self.passes_start()
                    sleep_s = self.sleep_s()
                except REDIS_DOWN as exc:
                    log.warning("scheduler: Redis unreachable (%s); retrying in %.1fs", exc, wait)
                    sleep_s, wait = wait, min(wait * 2, OUTAGE_BACKOFF_MAX_S)
                if sleep_s > 0:
                    time.sleep(sleep_s)
        except (KeyboardInterrupt, StopRequested):
            log.info("scheduler: stopping")
        finally:
            # The passes are bounded: the running ones end; none starts.
            self.pool.shutdown(wait=True, cancel_futures=True)
            try:
                self.register_death()
            except REDIS_DOWN:
                pass  # Redis drops the registration by its TTL

    def passes_start(self) -> list[Pass]:
        """Start every pass that is due and not still running; the started ones."""
        now = time.monotonic()
        started = []
        with self.lock:
            for due in self.passes:
                if due.due_at > now:
                    continue
                # Its next turn counts from this one, whether it runs now or is skipped.
                due.due_at = now + due.interval_s
                if due.running:
                    log.warning("scheduler: %s is still running; skipped once", due.name)
                    continue
                due.running = True
                started.append(due)
        for due in started:
            self.pool.submit(self.pass_run, due)
        return started

    def pass_run(self, due: Pass) -> None:
        began = time.monotonic()
        try:
            outcome = due.func()
        except REDIS_DOWN as exc:
            log.warning("scheduler: %s: Redis unreachable (%s)", due.name, exc)
        except Exception:
            log.exception("scheduler: %s failed", due.name)
        else:
            log.debug("scheduler: %s in %.3fs: %s", due.name, time.monotonic() - began, outcome)
        finally:
            connections_keep_if_sound()
            with self.lock:
                due.running = False

    def sleep_s(self) -> float:
        """Until the next pass is due, at most ``BEAT_S`` (the heartbeat's pace)."""
        next_at = min((p.due_at for p in self.passes), default=time.monotonic() + BEAT_S)
        return max(0.0, min(BEAT_S, next_at - time.monotonic()))


class Command(BaseCommand):
    help = "Run agentsite's periodic passes (sweeps, reapers, retries, retention)."

    def handle(self, *args: Any, **options: Any) -> None:
        from agentsite.cron import periodic_tasks

        scheduler = Scheduler(periodic_tasks(), logging_level=logging.INFO)
        names = ", ".join(f"{p.name} every {p.interval_s:g}s" for p in scheduler.passes)
        self.stdout.write(f"scheduler: {len(scheduler.passes)} periodic passes: {names}")
        scheduler.start()
