"""The clock that judges liveness: the database's.

On several hosts the clocks differ by seconds. A heartbeat written with one
host's clock and judged with another's declares a live worker lost when the
writer's clock is behind, and keeps a dead one alive as long as it is ahead. So
a heartbeat or a deadline is written with the database's clock, in the statement
that writes it, and judged against the same clock, in the statement that reads
it: every host then measures against the one clock they share.

(On SQLite, which lives in one host's file, the database's clock is that host's.)
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import DateTimeField, Expression, ExpressionWrapper, Value
from django.db.models.functions import Now


def database_now() -> Expression:
    """The database's time when the statement runs."""
    return Now()


def database_now_plus(seconds: float) -> Expression:
    """``seconds`` after (or, negative, before) the database's time."""
    return ExpressionWrapper(
        Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField()
    )
