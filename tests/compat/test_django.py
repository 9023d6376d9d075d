"""agentsite.compat.django: a compiled query gives what its queryset gives, compiling once."""

from __future__ import annotations

import inspect
from datetime import datetime
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db import connection, transaction
from django.db.models.query import get_related_populators
from django.db.models.sql.compiler import SQLCompiler
from django.db.transaction import TransactionManagementError

from agentsite.compat.django import CompiledQuery
from sessions.models import AgentSession, Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_internals_it_reads_keep_their_shape() -> None:
    assert list(inspect.signature(get_related_populators).parameters) == [
        "klass_info",
        "select",
        "db",
    ]
    assert list(inspect.signature(SQLCompiler.get_converters).parameters) == [
        "self",
        "expressions",
    ]
    assert list(inspect.signature(SQLCompiler.as_sql).parameters)[:1] == ["self"]


def test_the_handler_methods_it_overrides_and_calls_keep_their_shape() -> None:
    # OneHandOffHandler: run_get_response awaits get_response_async (overridden); the
    # synchronous chain is BaseHandler's, as Django's WSGI handler builds and calls it.
    assert "get_response_async" in inspect.getsource(ASGIHandler.run_get_response)
    assert list(inspect.signature(ASGIHandler.get_response_async).parameters) == [
        "self",
        "request",
    ]
    assert list(inspect.signature(BaseHandler.load_middleware).parameters) == [
        "self",
        "is_async",
    ]
    assert list(inspect.signature(BaseHandler.get_response).parameters) == ["self", "request"]


class Counted:
    """A queryset builder that counts how often it is asked to build."""

    def __init__(self, build: Any) -> None:
        self.build, self.calls = build, 0

    def __call__(self, **values: Any) -> Any:
        self.calls += 1
        return self.build(**values)


def sessions_of(make_user: Any) -> tuple[Any, Any, list[AgentSession]]:
    alice, bob = make_user("alice-cq"), make_user("bob-cq")
    made = [AgentSession.objects.create(owner=o, title=t) for o, t in ((alice, "a1"), (bob, "b1"))]
    made.append(AgentSession.objects.create(owner=alice, title="a2"))
    return alice, bob, made


def test_models_with_their_related_objects_as_the_queryset_gives_them(
    make_user: Any, django_assert_num_queries: Any
) -> None:
    alice, bob, _ = sessions_of(make_user)
    build = Counted(
        lambda owner_id: (
            AgentSession.objects.select_related("owner").filter(owner_id=owner_id).order_by("title")
        )
    )
    query: CompiledQuery[AgentSession] = CompiledQuery(build, owner_id=int)
    for owner in (alice, bob, alice):
        expected = list(build.build(owner_id=owner.pk))
        with django_assert_num_queries(1):  # the owners come with the sessions
            got = query.all(owner_id=owner.pk)
            owners = [s.owner.username for s in got]
        assert [(s.pk, s.title, s.owner_id) for s in got] == [
            (s.pk, s.title, s.owner_id) for s in expected
        ]
        assert owners == [owner.username] * len(expected)
        # Read through the database's converters: aware datetimes, as the ORM gives them.
        assert all(isinstance(s.created_at, datetime) and s.created_at.tzinfo for s in got)
        assert [s.created_at for s in got] == [s.created_at for s in expected]
        assert all(s._state.db == "default" and not s._state.adding for s in got)
    # Built twice at the first call (two sets of stand-ins find where the values go),
    # then only run.
    assert build.calls == 2


def test_an_integer_value_fits_any_integer_column(make_user: Any) -> None:
    """The stand-ins fit a 32-bit id (PostgreSQL refuses a value out of a column's range
    when the query compiles) and are told apart from a constant of the query."""
    alice = make_user("erin-cq")
    made = AgentSession.objects.create(owner=alice, title="e")
    run = Run.objects.create(session=made, owner_id=alice.pk, batch_size=29_000)
    query: CompiledQuery[str] = CompiledQuery(
        lambda owner_id, size: Run.objects.filter(
            owner_id=owner_id, batch_size=size, start_seq__lt=29_000
        ).values_list("id", flat=True),
        owner_id=int,
        size=int,
    )
    assert query.all(owner_id=alice.pk, size=29_000) == [run.pk]
    assert query.all(owner_id=alice.pk, size=0) == []


def test_tuples_flat_values_and_one_row(make_user: Any) -> None:
    alice, bob, made = sessions_of(make_user)
    tuples: CompiledQuery[tuple[str, str]] = CompiledQuery(
        lambda owner_id: (
            AgentSession.objects.filter(owner_id=owner_id)
            .order_by("title")
            .values_list("id", "title")
        ),
        owner_id=int,
    )
    assert tuples.all(owner_id=alice.pk) == [(made[0].pk, "a1"), (made[2].pk, "a2")]
    flat: CompiledQuery[str] = CompiledQuery(
        lambda session_id: AgentSession.objects.filter(pk=session_id).values_list(
            "title", flat=True
        ),
        session_id=str,
    )
    assert flat.all(session_id=made[1].pk) == ["b1"]
    one: CompiledQuery[AgentSession] = CompiledQuery(
        lambda session_id, owner_id: AgentSession.objects.filter(pk=session_id, owner_id=owner_id),
        session_id=str,
        owner_id=int,
    )
    found = one.one_or_none(session_id=made[1].pk, owner_id=bob.pk)
    assert found is not None and found.title == "b1"
    # Another user's session, an unknown id: nothing, as the ownership checks need.
    assert one.one_or_none(session_id=made[1].pk, owner_id=alice.pk) is None
    assert one.one_or_none(session_id="ses_unknown", owner_id=bob.pk) is None
    many: CompiledQuery[AgentSession] = CompiledQuery(
        lambda owner_id: AgentSession.objects.filter(owner_id=owner_id), owner_id=int
    )
    with pytest.raises(AgentSession.MultipleObjectsReturned):
        many.one_or_none(owner_id=alice.pk)


def test_a_value_goes_in_as_a_parameter_never_into_the_sql(make_user: Any) -> None:
    alice = make_user("carol-cq")
    AgentSession.objects.create(owner=alice, title="x")
    query: CompiledQuery[AgentSession] = CompiledQuery(
        lambda title: AgentSession.objects.filter(title=title), title=str
    )
    hostile = "x' OR '1'='1"
    assert query.all(title=hostile) == []
    assert [s.title for s in query.all(title="x")] == ["x"]


def test_wrong_values_are_refused_before_the_database_is_asked(make_user: Any) -> None:
    query: CompiledQuery[AgentSession] = CompiledQuery(
        lambda owner_id: AgentSession.objects.filter(owner_id=owner_id), owner_id=int
    )
    with pytest.raises(TypeError, match="owner_id must be an int"):
        query.all(owner_id="1")
    with pytest.raises(TypeError, match="owner_id must be an int"):
        query.all(owner_id=True)
    with pytest.raises(TypeError, match="expected"):
        query.all()
    with pytest.raises(TypeError, match="expected"):
        query.all(owner_id=1, other=2)
    with pytest.raises(TypeError, match="str or int"):
        CompiledQuery(lambda ids: AgentSession.objects.filter(pk__in=ids), ids=list)


def test_a_query_that_does_not_bind_a_value_is_refused_when_it_compiles() -> None:
    ignores: CompiledQuery[AgentSession] = CompiledQuery(
        lambda owner_id: AgentSession.objects.filter(owner_id=1), owner_id=int
    )
    with pytest.raises(TypeError, match="not bound as parameters"):
        ignores.all(owner_id=2)
    # A slice is written into the SQL (LIMIT 3): a value there would change the SQL.
    sliced: CompiledQuery[AgentSession] = CompiledQuery(
        lambda n: AgentSession.objects.order_by("id")[:n], n=int
    )
    with pytest.raises(TypeError, match="SQL depends on the values"):
        sliced.all(n=3)
    dicts: CompiledQuery[Any] = CompiledQuery(
        lambda owner_id: AgentSession.objects.filter(owner_id=owner_id).values("id"),
        owner_id=int,
    )
    with pytest.raises(TypeError, match="cannot build rows"):
        dicts.all(owner_id=1)


def test_a_locking_query_needs_a_transaction_where_the_database_locks(make_user: Any) -> None:
    session = AgentSession.objects.create(owner=make_user("dave-cq"))
    locked: CompiledQuery[Run] = CompiledQuery(
        lambda run_id: (
            Run.objects.select_related("session")
            .select_for_update(of=("session",))
            .filter(pk=run_id)
        ),
        run_id=str,
    )
    run = Run.objects.create(session=session, owner_id=session.owner_id)
    with transaction.atomic():
        got = locked.one_or_none(run_id=run.pk)
        assert got is not None and got.session.pk == session.pk
    if connection.features.has_select_for_update:
        with pytest.raises(TransactionManagementError):
            locked.one_or_none(run_id=run.pk)
    else:  # SQLite: no row locks, and Django runs the query outside a transaction too
        assert locked.one_or_none(run_id=run.pk) is not None
