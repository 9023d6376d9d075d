"""The shape of a periodic task: (function, queue, interval in seconds).

Each app lists its own in ``<app>/tasks.py`` as ``PERIODIC``; ``agentsite.cron``
registers them all with the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PeriodicTask = tuple[Callable[..., Any], str, int]

# In the meta of the RQ jobs the scheduler enqueues for them: a worker runs such a job
# in its own process rather than in a forked work horse (``jobs.worker.JobWorker``).
# They are agentsite's own bounded passes over the database; a fork for each costs
# more than the pass (about 40 ms of CPU a fork on an idle server, four a minute).
IN_PROCESS = "agentsite_in_process"
