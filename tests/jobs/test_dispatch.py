"""jobs.dispatch: which held job takes a free slot. Nothing is committed, so no worker runs them."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.utils import timezone
from redis.exceptions import RedisError

from jobs import dispatch, lifecycle, services
from jobs.models import Job

# Alone with its held jobs: no scheduler's sweep may hand them over meanwhile.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_scheduler")]


@pytest.fixture
def two_slots(settings: Any) -> None:
    settings.AGENTSITE_JOB_SLOTS = 2


@pytest.fixture
def one_slot(settings: Any) -> None:
    settings.AGENTSITE_JOB_SLOTS = 1


def queue(owner: Any, count: int, **kw: Any) -> list[str]:
    ids = []
    for _ in range(count):
        job, _ = services.job_create(
            owner=owner, tool="noop", args={}, idempotency_key=f"k{Job.objects.count()}", **kw
        )
        ids.append(job.id)
    return ids


def handed() -> set[str]:
    return set(dispatch.in_flight().values_list("id", flat=True))


def finish(job_id: str) -> None:
    lifecycle.job_start(job_id=job_id)
    lifecycle.job_succeed(job_id=job_id, result={})


def test_a_queued_job_is_held_until_a_dispatch_hands_it_over(user: Any, two_slots: None) -> None:
    (job_id,) = queue(user, 1)
    assert list(dispatch.held().values_list("id", flat=True)) == [job_id]

    assert dispatch.jobs_dispatch() == 1

    assert handed() == {job_id} and not dispatch.held().exists()


def test_no_more_jobs_are_handed_over_than_there_are_slots(user: Any, two_slots: None) -> None:
    first, second, third = queue(user, 3)

    assert dispatch.jobs_dispatch() == 2
    assert dispatch.jobs_dispatch() == 0

    assert handed() == {first, second}
    finish(first)
    assert handed() == {second, third}


def test_a_job_that_ends_hands_its_slot_over_in_its_own_transaction(
    user: Any, two_slots: None
) -> None:
    """Before: the end only asked for a dispatch after its commit, a second transaction
    (and on SQLite a second wait for the write lock) per job. Nothing commits here,
    so only a hand-over made inside the end's own transaction can be seen."""
    first, second, third = queue(user, 3)
    dispatch.jobs_dispatch()

    finish(first)

    assert handed() == {second, third}
    assert Job.objects.get(id=first).status == Job.Status.DONE
    assert not dispatch.held().exists()


def test_a_failed_dispatch_never_costs_the_job_its_end(
    user: Any, two_slots: None, monkeypatch: Any
) -> None:
    first, _, third = queue(user, 3)
    dispatch.jobs_dispatch()

    def broken() -> Any:
        raise DatabaseError("the pick failed")

    monkeypatch.setattr(dispatch, "_owners_waiting", broken)
    finish(first)

    assert Job.objects.get(id=first).status == Job.Status.DONE
    assert list(dispatch.held().values_list("id", flat=True)) == [third]  # left to the sweep


def test_an_end_while_redis_is_away_leaves_the_dispatch_to_after_its_commit(
    user: Any, two_slots: None, monkeypatch: Any
) -> None:
    first, _, third = queue(user, 3)
    dispatch.jobs_dispatch()

    def away() -> int:
        raise RedisError("connection refused")

    monkeypatch.setattr(dispatch, "slots_total", away)
    finish(first)

    assert Job.objects.get(id=first).status == Job.Status.DONE
    assert list(dispatch.held().values_list("id", flat=True)) == [third]


def test_free_slots_go_to_the_owner_with_the_fewest_jobs_in_flight(
    user: Any, other_user: Any, two_slots: None
) -> None:
    a1, a2, a3 = queue(user, 3)
    b1, b2 = queue(other_user, 2)

    dispatch.jobs_dispatch()
    assert handed() == {a1, b1}  # one each, though all of the first owner's came first

    finish(b1)
    dispatch.jobs_dispatch()
    assert handed() == {a1, b2}
    finish(a1)
    finish(b2)
    dispatch.jobs_dispatch()
    assert handed() == {a2, a3}


def test_with_one_slot_the_owner_just_served_gives_way_to_one_who_waits(
    user: Any, other_user: Any, one_slot: None
) -> None:
    """Before: when the flooding owner's job ended, neither owner had a job in flight,
    and the tie went to the oldest held job, the flooder's, until its backlog was gone."""
    a1, a2, _ = queue(user, 3)
    dispatch.jobs_dispatch()
    (b1,) = queue(other_user, 1)

    finish(a1)

    assert handed() == {b1}
    finish(b1)
    assert handed() == {a2}


def test_owners_who_wait_take_turns_one_job_each(
    user: Any, other_user: Any, one_slot: None
) -> None:
    a_jobs = queue(user, 3)
    b_jobs = queue(other_user, 3)
    dispatch.jobs_dispatch()

    served = []
    while in_flight := handed():
        (job_id,) = in_flight
        served.append(job_id)
        finish(job_id)

    assert served == [a_jobs[0], b_jobs[0], a_jobs[1], b_jobs[1], a_jobs[2], b_jobs[2]]


def test_an_owner_never_served_goes_before_owners_served_before(
    user: Any, other_user: Any, django_user_model: Any, one_slot: None
) -> None:
    (a1,) = queue(user, 1)
    dispatch.jobs_dispatch()
    a2, b1 = queue(user, 1) + queue(other_user, 1)
    finish(a1)  # the other owner's turn
    assert handed() == {b1}
    newcomer = django_user_model.objects.create_user("newcomer", password="pw-123456")
    (c1,) = queue(newcomer, 1)

    finish(b1)

    assert handed() == {c1}  # before the first owner's older job: never served yet
    finish(c1)
    assert handed() == {a2}


def test_a_job_waiting_on_dependencies_is_not_held_until_they_are_done(
    user: Any, two_slots: None
) -> None:
    (first,) = queue(user, 1)
    (dependent,) = queue(user, 1, depends_on=[first])
    dispatch.jobs_dispatch()
    assert handed() == {first}

    assert not dispatch.held().exists()

    finish(first)

    # Ready with its dependency's end, and handed the slot that end freed.
    assert handed() == {dependent}


def test_a_job_rq_lost_gives_its_slot_back_and_is_held_again(user: Any, two_slots: None) -> None:
    first, second, third = queue(user, 3)
    dispatch.jobs_dispatch()

    dispatch.job_handover_lost(job_id=first)

    assert handed() == {second}
    dispatch.jobs_dispatch()
    assert handed() == {first, second}  # the oldest ready job first
    assert list(dispatch.held().values_list("id", flat=True)) == [third]


def test_an_idempotent_repeat_holds_nothing_more(user: Any, two_slots: None) -> None:
    services.job_create(owner=user, tool="noop", args={}, idempotency_key="same")
    services.job_create(owner=user, tool="noop", args={}, idempotency_key="same")

    assert dispatch.held().count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_dispatches_at_once_never_count_the_same_free_slot(
    user: Any, two_slots: None, monkeypatch: Any
) -> None:
    """The first dispatch stops after counting the free slots until the second has run
    (or a second has passed, when the second is made to wait for the first)."""
    for _ in range(4):
        Job.objects.create(owner=user, tool="noop", timeout_s=5, ready_at=timezone.now())
    second_done = threading.Event()
    counting = threading.Event()
    owners_waiting = dispatch._owners_waiting

    def owners_waiting_after_the_other() -> Any:
        if threading.current_thread().name == "first":
            counting.set()
            second_done.wait(timeout=1)
        return owners_waiting()

    monkeypatch.setattr(dispatch, "_owners_waiting", owners_waiting_after_the_other)
    # Counted here, not run: no worker may start (and end) them while slots are counted.
    monkeypatch.setattr(dispatch, "rq_enqueue_or_leave", lambda job_id, timeout_s: None)

    def run(then: threading.Event | None = None) -> None:
        try:
            dispatch.jobs_dispatch()
        finally:
            connection.close()
            if then is not None:
                then.set()

    first = threading.Thread(target=run, name="first")
    second = threading.Thread(target=run, args=(second_done,), name="second")
    first.start()
    assert counting.wait(timeout=30)
    second.start()
    first.join(30)
    second.join(30)

    assert dispatch.in_flight().count() == 2
    assert dispatch.held().count() == 2


def test_the_dispatch_statements_select_what_held_and_in_flight_say(
    user: Any, other_user: Any
) -> None:
    # The dispatch's hand-written SQL must stay in step with the querysets that name
    # the same sets (and that the admin, the sweep and the tests use).
    now = timezone.now()
    for n, (status, enqueued, ready) in enumerate(
        (status, enqueued, ready)
        for status in Job.Status.values
        for enqueued in (None, now)
        for ready in (None, now - timedelta(seconds=1), now)
    ):
        Job.objects.create(
            owner=(user, other_user)[n % 2],
            tool="noop",
            timeout_s=60,
            status=status,
            enqueued_at=enqueued,
            ready_at=ready,
            idempotency_key=f"same-sets-{n}",
        )
    for n in range(6):  # more held jobs, of both owners, ready in another order
        Job.objects.create(
            owner=(user, other_user)[n % 3 == 0],
            tool="noop",
            timeout_s=60,
            ready_at=now - timedelta(seconds=10 - n),
            idempotency_key=f"held-{n}",
        )

    assert dispatch._any_held() == dispatch.held().exists()
    assert dispatch._in_flight_count() == dispatch.in_flight().count()
    per_owner = dispatch.in_flight().values_list("owner_id", flat=True)
    assert dispatch._in_flight_per_owner() == Counter(per_owner)
    held = list(dispatch.held().values_list("id", "owner_id"))
    assert len(held) == 8
    for owner in (user, other_user):
        first = next(job for job in held if job[1] == owner.pk)
        assert dispatch._first_held(owner.pk)[:2] == first  # type: ignore[index]
    # The owners who wait, the one served longest ago first.
    Job.objects.filter(owner=other_user, enqueued_at__isnull=False).update(
        enqueued_at=now - timedelta(minutes=1)
    )
    assert dispatch._owners_waiting() == [other_user.pk, user.pk]
    assert dispatch._first_held(other_user.pk + user.pk) is None
    # Handing over moves a job from one set to the other, as the querysets see it.
    job_id = held[0][0]
    assert dispatch.job_hand_over(job_id=job_id, timeout_s=60)
    assert not dispatch.job_hand_over(job_id=job_id, timeout_s=60)
    assert job_id in handed() and not dispatch.held().filter(pk=job_id).exists()
