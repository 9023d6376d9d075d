"""Job test setup: the test tools exist in this process and in every worker.

The workers are started lazily by the session fixtures, after this module has
set their environment: test tools, a short stop grace and quick webhook retries.
"""

from __future__ import annotations

import os

os.environ["AGENTSITE_EXTRA_TOOLS"] = "tests.jobs.tools_for_tests"
os.environ.setdefault("AGENTSITE_JOB_STOP_GRACE_S", "1")
os.environ.setdefault("AGENTSITE_WEBHOOK_RETRY_S", "0.5,0.5,0.5")

import tests.jobs.tools_for_tests  # noqa: F401  (registers the tools here too)
