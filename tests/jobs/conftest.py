"""Job test setup.

The workers are started lazily by the session fixtures, after this module has
set their environment: a short stop grace and quick webhook retries. (The test
tools are named in tests/environment.py.)
"""

from __future__ import annotations

import os

os.environ.setdefault("AGENTSITE_JOB_STOP_GRACE_S", "1")
os.environ.setdefault("AGENTSITE_WEBHOOK_RETRY_S", "0.5,0.5,0.5")
