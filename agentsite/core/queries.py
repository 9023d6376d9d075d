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
