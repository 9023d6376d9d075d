"""``manage.py scheduler``: RQ's cron scheduler for agentsite's periodic tasks.

The same scheduler as ``rqcron agentsite.cron``, except that it outlives a Redis
outage: RQ's loop registers its death and exits on the first Redis error,
which left nobody to hand over the jobs Redis forgot. This one waits for Redis
with backoff and goes on; its heartbeat registers it again when Redis comes
back empty.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.management.base import BaseCommand
from django_rq.cron import DjangoCronScheduler
from rq.exceptions import StopRequested

from agentsite.compat import rq as rq_internals
from agentsite.core import telemetry
from agentsite.core.workers import OUTAGE_BACKOFF_MAX_S, REDIS_DOWN

log = logging.getLogger(__name__)

CONFIG = "agentsite.cron"


class Scheduler(DjangoCronScheduler):
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
                    if self.enqueue_jobs():
                        self.save()
                    self.heartbeat()
                    if wait > 0.5:  # it had failed: Redis is back
                        telemetry.reconnect_count("redis")
                    wait = 0.5
                    sleep_s = self.calculate_sleep_interval()
                except REDIS_DOWN as exc:
                    log.warning("scheduler: Redis unreachable (%s); retrying in %.1fs", exc, wait)
                    sleep_s, wait = wait, min(wait * 2, OUTAGE_BACKOFF_MAX_S)
                if sleep_s > 0:
                    time.sleep(sleep_s)
        except (KeyboardInterrupt, StopRequested):
            log.info("scheduler: stopping")
        finally:
            try:
                self.register_death()
            except REDIS_DOWN:
                pass  # Redis drops the registration by its TTL


class Command(BaseCommand):
    help = "Run the scheduler of agentsite's periodic tasks (sweeps, reapers, retries)."

    def handle(self, *args: Any, **options: Any) -> None:
        scheduler = Scheduler(logging_level=logging.INFO)
        scheduler.load_config_from_file(CONFIG)
        self.stdout.write(f"scheduler: {len(scheduler.get_jobs())} periodic tasks from {CONFIG}")
        scheduler.start()
