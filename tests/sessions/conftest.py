"""Sessions test setup: the test tools exist in this process and in every worker."""

from __future__ import annotations

import os

_MODULE = "tests.sessions.tools_for_tests"
_extra = [m for m in os.environ.get("AGENTSITE_EXTRA_TOOLS", "").split(",") if m]
if _MODULE not in _extra:
    os.environ["AGENTSITE_EXTRA_TOOLS"] = ",".join([*_extra, _MODULE])

import tests.sessions.tools_for_tests  # noqa: E402, F401  (registers the tools here too)
