"""Django's query compiler, used to compile a hot query once rather than at every call;
its ASGI handler, with a synchronous view's request in one hand-off.

Verified against Django 5.2 (``pyproject.toml`` allows ``<6``). Checked by
``tests/compat/test_django.py``.

Django builds and compiles a queryset's SQL at every evaluation: on the requests
and turns that run a dozen small queries each, building and compiling them cost
several times what the database spends running them (``SQLCompiler.as_sql``
alone about 0.2 to 0.4 ms a query on the 2-core benchmark machine, against 0.04 ms
for running the same SQL). ``CompiledQuery`` compiles a queryset once per
process and, at each call, runs the same SQL with the call's
values, then builds the rows as the queryset would (model instances with their
``select_related`` objects, or ``values_list`` tuples) through the compiler's
own converters. The SQL of such a query must not depend on its values: each one
is a text or an integer compared as one value (``field=value``), never a list
(``__in``, whose SQL depends on its length) nor None (``IS NULL``).

``OneHandOffHandler``: Django's ASGI handler with a synchronous view's request
(the middleware chain built in synchronous mode, the URL resolution and the view)
run in one hand-off on an executor of the caller's, whose threads the caller owns.
Django keeps ``ASGIHandler`` out of its public API; the subclass relies on
``run_get_response`` awaiting ``get_response_async`` (overridden here) and on
``BaseHandler.load_middleware(is_async=False)`` and ``get_response``, as Django's
WSGI handler uses them.

The internals used: ``SQLCompiler.as_sql``, ``select``, ``klass_info``,
``annotation_col_map``, ``col_count``, ``has_extra_select``,
``get_converters``, and ``django.db.models.query.get_related_populators``; the
queryset's ``_iterable_class``, ``_known_related_objects`` and ``_prefetch_related_lookups``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db import connections
from django.db.models import QuerySet
from django.db.models.query import (
    FlatValuesListIterable,
    ModelIterable,
    ValuesListIterable,
    get_related_populators,
)
from django.db.transaction import TransactionManagementError
from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, get_resolver

Row = TypeVar("Row")

# The query compiles twice, each integer value standing in as one of these plus its
# argument's index: a parameter that is the first in one and the second in the other is
# that value. Both fit every integer field, a small one included (Django refuses a value
# out of a column's range, on PostgreSQL); a constant of the query is the same in both.
_INT_MARKS = (29_000, 30_000)
_marks = itertools.count()


class _TextMark(str):
    """The stand-in for a text value while the query compiles; Django's text fields
    keep a ``str`` as it is, so the parameter is this very object."""

    name: str


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    # (index in params, the value's name, the type Django gave the parameter: on
    # PostgreSQL an integer is bound as psycopg's Int4 or Int8, which says its type)
    slots: tuple[tuple[int, str, type], ...]
    for_update: bool
    compiler: Any
    converters: tuple[tuple[int, tuple[Any, ...], Any], ...]
    col_count: int | None  # rows are cut to it when the compiler selected extra columns
    kind: str  # "models", "tuples" or "flat"
    alias: str
    model: Any = None
    init_list: tuple[str, ...] = ()
    model_slice: slice | None = None
    related: tuple[Any, ...] = ()
    annotations: tuple[tuple[str, int], ...] = ()


class CompiledQuery(Generic[Row]):
    """A queryset compiled once, run with new values at every call.

    ``build`` makes the queryset from keyword arguments, ``types`` names each
    argument's type (``str`` or ``int``)::

        live_runs = CompiledQuery(
            lambda session_id: Run.objects.filter(session_id=session_id, status__in=ACTIVE),
            session_id=str,
        )
        runs = live_runs.all(session_id=session.pk)

    ``build`` runs twice at the first call, with two sets of stand-ins for the
    values (twice more for ``one_or_none``'s own form of the query), on the database
    alias the queryset picks then: a router that picks a database by the values is
    not followed. A query whose SQL changes with its values, or that leaves a value
    out of its parameters, is refused when it first compiles, and so is one whose
    rows this cannot build (a ``values()`` dict, ``prefetch_related``).
    """

    def __init__(self, build: Callable[..., QuerySet[Any, Row]], **types: type) -> None:
        for name, kind in types.items():
            if kind not in (str, int):
                raise TypeError(f"{name}: a compiled query takes str or int values, not {kind}")
        self.build = build
        self.types = types
        self._compiled: dict[bool, _Compiled] = {}  # by one_or_none's form or all's
        self._lock = threading.Lock()

    def all(self, **values: Any) -> list[Row]:
        """The rows, as ``list(build(**values))`` would give them."""
        return self._run(values, one=False)

    def one_or_none(self, **values: Any) -> Row | None:
        """The one row, or None; ``MultipleObjectsReturned`` when there are several
        (as ``build(**values).get()``, without the ordering, which a get does not need)."""
        rows = self._run(values, one=True)
        if len(rows) > 1:
            model = self._compiled_for(one=True).compiler.query.model
            raise model.MultipleObjectsReturned(
                f"get() returned more than one {model._meta.object_name}"
            )
        return rows[0] if rows else None

    # --- running ------------------------------------------------------------------------

    def _run(self, values: dict[str, Any], *, one: bool) -> list[Any]:
        compiled = self._compiled_for(one=one)
        connection = connections[compiled.alias]
        if compiled.for_update and connection.get_autocommit():
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        if values.keys() != self.types.keys():
            raise TypeError(f"values for {sorted(self.types)} expected, got {sorted(values)}")
        params = list(compiled.params)
        for index, name, kind in compiled.slots:
            value = self._bound(name, values[name])
            params[index] = value if type(value) is kind else kind(value)
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows: Sequence[Any] = cursor.fetchall()
        return _built(compiled, rows, connection)

    def _bound(self, name: str, value: Any) -> Any:
        kind = self.types[name]
        if kind is int:
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            return int(value)
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        return str(value)

    # --- compiling ----------------------------------------------------------------------

    def _compiled_for(self, *, one: bool) -> _Compiled:
        compiled = self._compiled.get(one)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(one)
                if compiled is None:
                    compiled = self._compiled[one] = self._compile(one=one)
        return compiled

    def _compile(self, *, one: bool) -> _Compiled:
        """Compile the query twice, with two sets of stand-ins, and find where each value goes."""
        built = [self._built_with(base, one=one) for base in _INT_MARKS]
        (queryset, stand_ins, compiler, sql, params), other = built
        if other[3] != sql or len(other[4]) != len(params):
            raise TypeError(f"the SQL depends on the values: {sql!r}")
        slots: list[tuple[int, str, type]] = []
        for index, (param, other_param) in enumerate(zip(params, other[4], strict=True)):
            if isinstance(param, _TextMark):
                slots.append((index, param.name, str))
                continue
            for name, value in stand_ins.items():
                if (
                    isinstance(param, int)
                    and not isinstance(value, str)
                    and param == value
                    and other_param == other[1][name]
                ):
                    slots.append((index, name, type(param)))
                    break
            else:
                if param != other_param:
                    raise TypeError(f"parameter {index} of {sql!r} is no value given")
        missing = set(stand_ins) - {name for _, name, _ in slots}
        if missing:
            raise TypeError(
                f"values not bound as parameters of {sql!r}: {', '.join(sorted(missing))}"
            )
        return _compiled(queryset, compiler, sql, params, slots)

    def _built_with(self, int_base: int, *, one: bool) -> tuple[Any, dict[str, Any], Any, str, Any]:
        stand_ins: dict[str, Any] = {}
        for index, (name, kind) in enumerate(self.types.items()):
            if kind is int:
                stand_ins[name] = int_base + index
            else:
                mark = _TextMark(f"\x00compiled-query-value-{next(_marks)}")
                mark.name = name
                stand_ins[name] = mark
        queryset = self.build(**stand_ins)
        if one:
            queryset = queryset.order_by()[:2]
        if getattr(queryset, "_prefetch_related_lookups") or getattr(  # noqa: B009
            queryset, "_known_related_objects"
        ):
            raise TypeError("a compiled query cannot prefetch related objects")
        compiler = queryset.query.get_compiler(connection=connections[queryset.db])
        sql, params = compiler.as_sql()
        return queryset, stand_ins, compiler, sql, params


def _compiled(
    queryset: QuerySet[Any, Any], compiler: Any, sql: str, params: Any, slots: list[Any]
) -> _Compiled:
    """What running the compiled query needs: its SQL, and how to build its rows."""
    alias = queryset.db
    connection = compiler.connection
    fields = [column[0] for column in compiler.select[0 : compiler.col_count]]
    if compiler.has_composite_fields(fields):
        raise TypeError("a compiled query cannot read composite fields")
    converters = tuple(
        (position, tuple(convs), expression)
        for position, (convs, expression) in compiler.get_converters(fields).items()
    )
    iterable = queryset._iterable_class
    common = {
        "sql": sql,
        "params": tuple(params),
        "slots": tuple(slots),
        # As Django checks it: only where the database locks rows (not SQLite).
        "for_update": bool(
            queryset.query.select_for_update and connection.features.has_select_for_update
        ),
        "compiler": compiler,
        "converters": converters,
        "col_count": compiler.col_count if compiler.has_extra_select else None,
        "alias": alias,
    }
    if iterable is ModelIterable:
        klass_info = compiler.klass_info
        select_fields = klass_info["select_fields"]
        start, end = select_fields[0], select_fields[-1] + 1
        return _Compiled(
            kind="models",
            model=klass_info["model"],
            init_list=tuple(f[0].target.attname for f in compiler.select[start:end]),
            model_slice=slice(start, end),
            # The stubs describe Django 6.0's signature (a fetch_mode after the alias).
            related=tuple(
                get_related_populators(klass_info, compiler.select, alias)  # type: ignore[call-arg]
            ),
            annotations=tuple(compiler.annotation_col_map.items()),
            **common,
        )
    if iterable is ValuesListIterable:
        return _Compiled(kind="tuples", **common)
    if iterable is FlatValuesListIterable:
        return _Compiled(kind="flat", **common)
    raise TypeError(f"a compiled query cannot build rows of {iterable.__name__}")


def _built(compiled: _Compiled, rows: Sequence[Any], connection: Any) -> list[Any]:
    """The rows as the queryset would give them, through the compiler's converters."""
    if compiled.col_count is not None:
        rows = [row[: compiled.col_count] for row in rows]
    if compiled.converters:
        converted = []
        for row in rows:
            row = list(row)
            for position, convs, expression in compiled.converters:
                value = row[position]
                for convert in convs:
                    value = convert(value, expression, connection)
                row[position] = value
            converted.append(row)
        rows = converted
    if compiled.kind == "flat":
        return [row[0] for row in rows]
    if compiled.kind == "tuples":
        return [tuple(row) for row in rows]
    objects = []
    for row in rows:
        obj = compiled.model.from_db(compiled.alias, compiled.init_list, row[compiled.model_slice])
        for populator in compiled.related:
            populator.populate(row, obj)
        for attribute, position in compiled.annotations:
            setattr(obj, attribute, row[position])
        objects.append(obj)
    return objects


class OneHandOffHandler(ASGIHandler):
    """``ASGIHandler`` whose synchronous views run on ``executor``, chain and all; then
    ``after_request()`` on the same thread. An ``async def`` view keeps Django's path."""

    def __init__(self, executor: ThreadPoolExecutor, after_request: Callable[[], None]) -> None:
        super().__init__()  # the async chain, for async views
        self.sync = BaseHandler()
        self.sync.load_middleware(is_async=False)
        self.threads = executor
        self.after_request = after_request

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        if self.view_is_async(request):
            return await super().get_response_async(request)
        response: HttpResponseBase = await sync_to_async(
            self.sync_response, thread_sensitive=False, executor=self.threads
        )(request)
        return response

    @staticmethod
    def view_is_async(request: HttpRequest) -> bool:
        try:
            match = get_resolver(settings.ROOT_URLCONF).resolve(request.path_info)
        except Resolver404:
            return False  # the 404 page is a synchronous answer
        return iscoroutinefunction(match.func)

    def sync_response(self, request: HttpRequest) -> HttpResponseBase:
        try:
            return self.sync.get_response(request)
        finally:
            self.after_request()
