"""Deleting and updating many rows a bounded batch at a time.

Housekeeping (retention, released idempotency keys) never runs one statement
over an unbounded set of rows: each statement touches at most ``Budget.size``
rows, by primary key, in its own short transaction (autocommit), and a pass runs
at most ``Budget.batches`` of them. What is left waits for the next pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import QuerySet


class Budget:
    """Rows per statement, and how many statements a pass may still run."""

    def __init__(self, *, size: int, batches: int) -> None:
        self.size = size
        self.left = batches

    def take(self) -> bool:
        """Spend one statement; False when none is left."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def retention_budget() -> Budget:
    """One pass's budget: ``AGENTSITE_RETENTION_BATCHES`` statements of ``…_BATCH`` rows."""
    return Budget(
        size=settings.AGENTSITE_RETENTION_BATCH, batches=settings.AGENTSITE_RETENTION_BATCHES
    )


def rows_delete(rows: QuerySet[Any], budget: Budget) -> tuple[int, bool]:
    """Delete ``rows`` a batch per statement; returns (rows deleted, all of them gone)."""
    deleted = 0
    while True:
        pks = list(rows.order_by().values_list("pk", flat=True)[: budget.size])
        if not pks:
            return deleted, True
        if not budget.take():
            return deleted, False
        _, per_model = rows.model._base_manager.filter(pk__in=pks).delete()
        deleted += per_model.get(rows.model._meta.label, 0)
        if len(pks) < budget.size:
            return deleted, True


def rows_update(rows: QuerySet[Any], budget: Budget, **values: Any) -> tuple[int, bool]:
    """Update ``rows`` a batch per statement; ``rows`` must stop matching once updated."""
    updated = 0
    while True:
        pks = list(rows.order_by().values_list("pk", flat=True)[: budget.size])
        if not pks:
            return updated, True
        if not budget.take():
            return updated, False
        updated += rows.filter(pk__in=pks).update(**values)
        if len(pks) < budget.size:
            return updated, True


def parents_purge(
    expired: Callable[[], QuerySet[Any]],
    children_delete: Callable[[list[Any], Budget], bool],
    budget: Budget,
) -> int:
    """Delete the rows ``expired()`` finds, a batch at a time, each batch's children first.

    ``children_delete(ids, budget)`` removes what hangs off those rows and says
    whether it finished within the budget; a pass cut short leaves whole parents.
    Returns how many parent rows went.
    """
    deleted = 0
    while budget.left > 0:
        parents = expired()
        ids = list(parents.values_list("pk", flat=True)[: budget.size])
        if not ids or not children_delete(ids, budget):
            return deleted
        gone, complete = rows_delete(parents.model._base_manager.filter(pk__in=ids), budget)
        deleted += gone
        if not complete or len(ids) < budget.size:
            return deleted
    return deleted
