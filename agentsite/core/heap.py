"""The cyclic garbage collector, tuned for processes that hold many long-lived objects.

A web process following thousands of sockets holds hundreds of thousands of
objects that live as long as their connection, beside everything Django and
the application imported at start. With CPython's default thresholds
(700, 10, 10) every collection of the oldest generation walks all of them,
and each such pause stalls every stream the process serves, the longer the
more connections it holds (docs/benchmarks.md, "Streams").

``settle_long_lived`` is called once start-up is done: what exists then is
moved out of the collector's sight (``gc.freeze``: modules, settings, URL
patterns, models are never garbage), and the youngest generation is allowed
to grow much larger before it is collected, so that objects which live for
a request or one delivery die before any collection sees them and few are
promoted to the oldest generation. Cycles are still collected, only later.
"""

from __future__ import annotations

import gc

from django.conf import settings


def settle_long_lived() -> None:
    """Freeze what start-up created and apply ``AGENTSITE_GC_THRESHOLDS``."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*settings.AGENTSITE_GC_THRESHOLDS)
