"""jobs.dispatch: which held job takes a free slot. Nothing is committed, so no worker runs them."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs import dispatch, lifecycle, services
from jobs.models import Job

# Alone with its held jobs: no scheduler's sweep may hand them over meanwhile.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_scheduler")]


@pytest.fixture
def two_slots(settings: Any) -> None:
    settings.AGENTSITE_JOB_SLOTS = 2


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
    assert dispatch.jobs_dispatch() == 1
    assert handed() == {second, third}


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


def test_a_job_waiting_on_dependencies_is_not_held_until_they_are_done(
    user: Any, two_slots: None
) -> None:
    (first,) = queue(user, 1)
    (dependent,) = queue(user, 1, depends_on=[first])
    dispatch.jobs_dispatch()
    assert handed() == {first}

    finish(first)

    assert list(dispatch.held().values_list("id", flat=True)) == [dependent]
    assert dispatch.jobs_dispatch() == 1


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
    next_held = dispatch._next_held

    def next_held_after_the_other(load: Any) -> Any:
        if threading.current_thread().name == "first":
            counting.set()
            second_done.wait(timeout=1)
        return next_held(load)

    monkeypatch.setattr(dispatch, "_next_held", next_held_after_the_other)
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
