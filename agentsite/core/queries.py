"""Query helpers shared by the apps."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import QuerySet

Row = TypeVar("Row")


def get_or_none(queryset: QuerySet[Any, Row]) -> Row | None:
    """The one row a filter on a unique key matches, or None.

    ``first()`` would order by the model's default ordering first; on the
    per-request lookups (token, session, run) compiling that ORDER BY cost more
    than the query itself.
    """
    try:
        return queryset.get()
    except queryset.model.DoesNotExist:
        return None


def count_up_to(queryset: QuerySet[Any], bound: int) -> tuple[int, bool]:
    """How many rows ``queryset`` has, reading at most ``bound + 1`` of them.

    ``(count, True)`` when it has at most ``bound``; ``(bound, False)`` when it has
    more, so the count is a lower bound. The rows read are the first ones in the
    queryset's own order, so the count reads the index its pages read.
    """
    counted = queryset[: bound + 1].count()
    return min(counted, bound), counted <= bound
