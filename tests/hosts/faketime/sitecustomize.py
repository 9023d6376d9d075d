"""Loaded only by the hosts suite's worker host, whose wall clock libfaketime sets ahead.

The worker host is told to leave the monotonic clock alone
(``FAKETIME_DONT_FAKE_MONOTONIC=1``), as a host whose clock is off has a true one:
otherwise every timed wait (a lock's, an event's) is computed on the faked
monotonic clock and waited on the true one, and a one-second wait lasts 31. With
it, libfaketime 0.9.10 refuses the absolute monotonic deadline ``time.sleep``
hands ``clock_nanosleep`` (EINVAL); so here a sleep waits as ``select`` does,
which libfaketime lets through. Nothing else changes.
"""

from __future__ import annotations

import operator
import select
import time
from typing import SupportsIndex


def _sleep(seconds: float | SupportsIndex) -> None:
    length = float(seconds) if isinstance(seconds, float) else float(operator.index(seconds))
    if length < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], length)


time.sleep = _sleep
