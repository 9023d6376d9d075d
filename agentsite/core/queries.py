"""Query helpers shared by the apps."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Field, Model, QuerySet

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


@functools.cache
def _insert_sql(model: type[Model], alias: str) -> tuple[str, tuple[Field[Any, Any], ...], bool]:
    """The INSERT of a new row of ``model`` (every concrete column but an automatic id),
    whether it reads the automatic id back, and the fields in the order of its values."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    auto = model._meta.auto_field
    fields = tuple(f for f in model._meta.concrete_fields if f is not auto)
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)}"
        f" ({', '.join(quote(str(f.column)) for f in fields)})"
        f" VALUES ({', '.join(['%s'] * len(fields))})"
    )
    if auto is None:
        return sql, fields, False
    return f"{sql} RETURNING {quote(str(auto.column))}", fields, True


def insert(obj: Model, *, using: str = "default") -> None:
    """Save ``obj``, a new row, with one INSERT whose SQL is written once per model.

    What ``obj.save(force_insert=True)`` does (each field's ``pre_save``, an
    ``auto_now_add`` stamped, the automatic id read back), without Django building
    and compiling the statement each time and without the model signals, which
    nothing listens to on the models this is used for. PostgreSQL and SQLite 3.35+
    read the id back from the INSERT itself; elsewhere this is ``save``.
    """
    connection = connections[using]
    if not connection.features.can_return_columns_from_insert:
        obj.save(force_insert=True, using=using)
        return
    sql, fields, returns = _insert_sql(type(obj), using)
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        if returns:
            obj.pk = cursor.fetchone()[0]
    obj._state.adding, obj._state.db = False, using
