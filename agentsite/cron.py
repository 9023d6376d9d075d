"""RQ cron configuration, loaded by ``manage.py scheduler`` (or ``rqcron agentsite.cron``).

Periodic housekeeping that must not depend on any one worker being alive:
deadlines, abandoned jobs and runs, webhook retries, expiry.
"""

from __future__ import annotations

from rq import cron

from agentsite.periodic import periodic_tasks

for func, queue_name, interval in periodic_tasks():
    cron.register(func, queue_name, interval=interval, job_timeout=60, result_ttl=60)
