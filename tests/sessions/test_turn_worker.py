"""One turn worker runs many sessions' turns at once, and stops or dies without losing any."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import django_rq
import pytest
from rq import Queue
from rq.exceptions import StopRequested
from rq.job import Job as RqJob

from jobs.live import redis_connection
from sessions.llm.scripted import scripted_open, scripted_push, scripted_requests
from sessions.models import AgentSession, Event, Run
from sessions.runs import run_request_cancel
from sessions.services import message_post
from sessions.worker import TURN_WORKER_ARGS, TurnWorker
from tests.conftest import (
    Processes,
    registered_worker,
    unregister_worker,
    wait_for_workers,
    wait_until,
)
from tests.sessions.factories import kinds, make_session, messages, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "".join(f"word{i} " for i in range(400))


def post(session: AgentSession, text: str) -> Run:
    _, run = message_post(session=session, text=text)
    return run


def all_running(runs: list[Run], timeout: float = 60) -> None:
    ids = [r.id for r in runs]
    wait_until(
        lambda: Run.objects.filter(pk__in=ids, status=Run.Status.RUNNING).count() == len(ids),
        timeout=timeout,
    )


def event_of(run: Run, kind: str) -> Event:
    return Event.objects.filter(run=run, kind=kind).order_by("-seq")[0]


def test_thirty_sessions_turns_overlap_in_one_worker_and_each_session_stays_serial(
    user: Any, rq_workers: Processes
) -> None:
    sessions = [make_session(user) for _ in range(30)]
    for session in sessions:
        scripted_push(session.id, {"text": "Held until the gate opens.", "gate": "go"})
    scripted_push(sessions[0].id, {"text": "The second message's answer."})
    runs = [post(session, "hello") for session in sessions]

    all_running(runs)  # a worker running one turn at a time never gets here
    later = post(sessions[0], "and then this")
    assert later.id != runs[0].id
    assert Run.objects.get(pk=later.id).status == Run.Status.QUEUED
    for session in sessions:
        scripted_open(session.id, "go")
    finished = [wait_for_run(run.id) for run in runs]
    later = wait_for_run(later.id)

    assert {run.status for run in finished} == {Run.Status.COMPLETED}
    starts = [event_of(run, "run_started").created_at for run in finished]
    ends = [event_of(run, "run_finished").created_at for run in finished]
    assert max(starts) < min(ends)  # every interval intersects every other
    connection = django_rq.get_connection("turns")
    workers = {RqJob.fetch(run.id, connection=connection).worker_name for run in finished}
    assert len(workers) == 1
    # The session's second run started only after its first had finished.
    assert event_of(later, "run_started").seq > event_of(finished[0], "run_finished").seq
    assert messages(sessions[0], later) == ["The second message's answer."]


def test_an_interrupt_stops_only_its_own_turn(user: Any, rq_workers: Processes) -> None:
    sessions = [make_session(user) for _ in range(3)]
    for session in sessions:
        scripted_push(session.id, {"text": LONG, "chunk": 6, "delay_s": 0.02, "gate": "go"})
    runs = [post(session, "talk") for session in sessions]
    all_running(runs)
    wait_until(lambda: Event.objects.filter(run=runs[0], kind="assistant_delta").exists())

    assert run_request_cancel(run_id=runs[0].id) == "cancelling"
    assert wait_for_run(runs[0].id).status == Run.Status.CANCELLED
    assert [r.status for r in Run.objects.filter(pk__in=[runs[1].id, runs[2].id])] == [
        Run.Status.RUNNING
    ] * 2
    for session in sessions[1:]:
        scripted_open(session.id, "go")
    for session, run in zip(sessions[1:], runs[1:], strict=True):
        assert wait_for_run(run.id).status == Run.Status.COMPLETED
        assert messages(session, run) == [LONG]


def test_a_slow_blocking_tool_does_not_delay_another_sessions_first_token(
    user: Any, rq_workers: Processes
) -> None:
    slow, quick = make_session(user), make_session(user)
    scripted_push(
        slow.id,
        {"tool_calls": [{"name": "pause_read", "input": {"seconds": 6}}]},
        {"text": "The pause is over."},
    )
    scripted_push(quick.id, {"text": "Right away."})
    slow_run = post(slow, "pause for a while")
    wait_until(lambda: Event.objects.filter(run=slow_run, kind="tool_call").exists())

    quick_run = wait_for_run(post(quick, "are you there?").id)
    slow_run = wait_for_run(slow_run.id)

    assert quick_run.status == slow_run.status == Run.Status.COMPLETED
    tool_done = event_of(slow_run, "tool_result").created_at
    assert quick_run.first_token_at is not None and quick_run.first_token_at < tool_done
    assert quick_run.finished_at is not None and quick_run.finished_at < tool_done


def test_a_blocking_tool_past_its_deadline_answers_timed_out_and_the_turn_goes_on(
    user: Any, rq_workers: Processes
) -> None:
    session = make_session(user)
    scripted_push(
        session.id,
        {"tool_calls": [{"name": "overdue_read", "input": {"seconds": 3}}]},
        {"text": "That read was too slow."},
    )
    run = wait_for_run(post(session, "read it").id)

    assert run.status == Run.Status.COMPLETED
    result = event_of(run, "tool_result").payload
    assert result["is_error"] and result["output"]["error"]["code"] == "tool_timed_out"
    assert messages(session, run) == ["That read was too slow."]


# --- a worker of the test's own, to kill and to stop -------------------------------------


@pytest.fixture
def own_turn_worker(rq_workers: Processes) -> Iterator[Callable[..., Any]]:
    """Replace the suite's turn worker with workers this test may kill or stop."""
    shared = rq_workers.named("worker-turns")
    rq_workers.stop(shared)
    unregister_worker(shared.pid)
    started: list[Any] = []

    def start(name: str, **env: str) -> Any:
        proc = rq_workers.start(name, *TURN_WORKER_ARGS, env=env)
        started.append(proc)
        wait_until(lambda: registered_worker(proc.pid), timeout=30)
        return proc

    yield start
    for proc in started:
        rq_workers.stop(proc)
        unregister_worker(proc.pid)
    rq_workers.start("worker-turns", *TURN_WORKER_ARGS)
    wait_for_workers("turns", 1)


def test_a_killed_worker_s_turns_all_fail_as_lost_and_their_sessions_answer_again(
    user: Any, own_turn_worker: Callable[..., Any], rq_scheduler: Processes
) -> None:
    doomed = own_turn_worker("worker-turns-doomed")
    sessions = [make_session(user) for _ in range(20)]
    for session in sessions:
        scripted_push(session.id, {"text": "Never finished.", "gate": "never"}, {"text": "Back."})
    runs = [post(session, "hello") for session in sessions]
    # Mid-turn: every model call has begun (and taken its gated response).
    ids = [r.id for r in runs]
    wait_until(
        lambda: (
            Event.objects.filter(run_id__in=ids, kind="assistant_delta")
            .values("run_id")
            .distinct()
            .count()
            == len(ids)
        ),
        timeout=60,
    )

    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait()
    unregister_worker(doomed.pid)
    own_turn_worker("worker-turns-after")

    wait_until(
        lambda: Run.objects.filter(pk__in=ids, status=Run.Status.FAILED).count() == len(ids),
        timeout=30,
    )
    for run in runs:
        assert event_of(run, "error").payload["code"] == "worker_lost"
    answers = [post(session, "still there?") for session in sessions]
    for session, answer in zip(sessions, answers, strict=True):
        assert wait_for_run(answer.id).status == Run.Status.COMPLETED
        assert messages(session, answer) == ["Back."]


def test_sigterm_lets_turns_finish_and_hands_back_the_rest_to_the_next_worker(
    user: Any, own_turn_worker: Callable[..., Any], rq_workers: Processes
) -> None:
    stopping = own_turn_worker("worker-turns-stopping", AGENTSITE_TURN_STOP_GRACE_S="3")
    finishing, unfinished = make_session(user), make_session(user)
    scripted_push(finishing.id, {"text": "Finished in time.", "gate": "go"})
    scripted_push(
        unfinished.id,
        {"text": "Half an answ", "gate": "never"},
        {"text": "A whole answer, from the next worker."},
    )
    done, handed = post(finishing, "quick one"), post(unfinished, "slow one")
    all_running([done, handed])
    wait_until(lambda: Event.objects.filter(run=handed, kind="assistant_delta").exists())

    stopping.send_signal(signal.SIGTERM)
    scripted_open(finishing.id, "go")
    assert wait_for_run(done.id).status == Run.Status.COMPLETED
    assert messages(finishing, done) == ["Finished in time."]
    try:
        # Past the worker's own 3 + 15 s, so a turn it could not hand back shows in its log.
        wait_until(
            lambda: Event.objects.filter(run=handed, kind="run_requeued").exists(), timeout=25
        )
    except AssertionError:
        pytest.fail(rq_workers.log_tail(stopping, "handed back no turn"))
    assert rq_workers.wait_for_exit(stopping, timeout=30) == 0
    assert Run.objects.get(pk=handed.id).status == Run.Status.QUEUED

    own_turn_worker("worker-turns-next")
    handed = wait_for_run(handed.id)
    assert handed.status == Run.Status.COMPLETED and handed.batch_size == 1
    assert messages(unfinished, handed) == ["A whole answer, from the next worker."]
    assert kinds(unfinished) == [
        "user_message",
        "run_started",
        "run_requeued",
        "run_started",
        "assistant_message",
        "run_finished",
    ]
    first_try, second_try = scripted_requests(unfinished.id)
    assert first_try["messages"] == second_try["messages"]


def test_a_stop_signalled_just_before_the_dequeue_is_not_lost_in_the_wait_for_a_job() -> None:
    # The signal handler raises only while the worker waits for a job; one that lands
    # after RQ's loop looked at the flag and before that wait must still stop it
    # there, not after the whole wait for a job (minutes, by RQ's default).
    connection = redis_connection()
    worker = TurnWorker([Queue("stop-race-test", connection=connection)], connection=connection)
    worker._stop_requested = True
    try:
        with pytest.raises(StopRequested):
            worker.dequeue_job_and_maintain_ttl(timeout=60)
        assert worker.slots.acquire(blocking=False)  # the slot it took was given back
    finally:
        worker.engine.close()
