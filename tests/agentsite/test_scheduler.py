"""The scheduler runs agentsite's periodic passes itself, on threads of its own.

In-process, with the scheduler class ``manage.py scheduler`` runs, a real Redis
for its registration and heartbeat and real threads; the passes its processes
run for real are exercised by the tests of each pass (the reaper, the job
sweep, retention) through the ``rq_scheduler`` fixture.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import django_rq
import pytest
from rq.cron_scheduler_registry import get_registry_key

from agentsite.management.commands.scheduler import BEAT_S, Pass, Scheduler
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

ran: list[tuple[str, int, str]] = []
release = threading.Event()


def quick() -> str:
    ran.append(("quick", os.getpid(), threading.current_thread().name))
    return "done"


def held() -> None:
    ran.append(("held", os.getpid(), threading.current_thread().name))
    release.wait(10)


def broken() -> None:
    ran.append(("broken", os.getpid(), threading.current_thread().name))
    raise RuntimeError("the pass broke")


@pytest.fixture
def scheduler() -> Any:
    ran.clear()
    release.clear()
    made: list[Scheduler] = []

    def make(*passes: Any) -> Scheduler:
        made.append(Scheduler(list(passes)))
        return made[-1]

    yield make
    release.set()
    for each in made:
        each.pool.shutdown(wait=True)


def due_again(scheduler: Scheduler) -> None:
    for each in scheduler.passes:
        each.due_at = 0.0


def names() -> list[str]:
    return [name for name, _, _ in ran]


def queued_jobs() -> int:
    return sum(django_rq.get_queue(name).count for name in ("default", "turns"))


def test_a_pass_runs_on_the_scheduler_s_own_thread_and_nothing_is_enqueued(
    scheduler: Any,
) -> None:
    before = queued_jobs()
    mine = scheduler((quick, 60))
    assert [p.name for p in mine.passes] == [f"{__name__}.quick"]
    assert mine.passes_start() == mine.passes
    wait_until(lambda: ran and not mine.passes[0].running)
    [(_, pid, thread)] = ran
    assert pid == os.getpid() and thread.startswith("pass")
    assert queued_jobs() == before
    # Not due again before its interval; the loop sleeps at most a heartbeat's time.
    assert mine.passes_start() == [] and mine.passes[0].due_at > time.monotonic() + 30
    assert 0 < mine.sleep_s() <= BEAT_S


def test_a_pass_still_running_is_skipped_and_the_others_keep_their_pace(
    scheduler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mine = scheduler((held, 1), (quick, 1))
    mine.passes_start()
    wait_until(lambda: sorted(names()) == ["held", "quick"] and not mine.passes[1].running)
    due_again(mine)
    with caplog.at_level(logging.WARNING):
        started = mine.passes_start()
    assert [p.func for p in started] == [quick]
    assert f"{__name__}.held is still running; skipped once" in caplog.text
    wait_until(lambda: names().count("quick") == 2)
    release.set()
    wait_until(lambda: not mine.passes[0].running)
    due_again(mine)
    assert [p.func for p in mine.passes_start()] == [held, quick]


def test_a_pass_that_raises_is_logged_and_runs_again_at_its_next_turn(
    scheduler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mine = scheduler((broken, 1))
    with caplog.at_level(logging.ERROR):
        mine.passes_start()
        wait_until(lambda: ran and not mine.passes[0].running)
    assert f"{__name__}.broken failed" in caplog.text and "the pass broke" in caplog.text
    due_again(mine)
    mine.passes_start()
    wait_until(lambda: names() == ["broken", "broken"])


def test_the_scheduler_is_registered_and_beats_where_healthz_reads_it(scheduler: Any) -> None:
    mine = scheduler((quick, 60))
    conn = django_rq.get_connection("default")
    mine.register_birth()
    try:
        mine.heartbeat()
        assert conn.zscore(get_registry_key(), mine.name) is not None
    finally:
        mine.register_death()
    assert conn.zscore(get_registry_key(), mine.name) is None


def test_the_passes_are_every_app_s(scheduler: Any) -> None:
    from agentsite.cron import periodic_tasks

    mine = scheduler(*periodic_tasks())
    assert {p.name for p in mine.passes} == {
        "jobs.tasks.sweep_jobs",
        "jobs.tasks.purge_jobs",
        "sessions.tasks.reap_runs",
        "sessions.tasks.expire_approvals",
        "sessions.tasks.purge_sessions",
        "a2a_api.tasks.push_sweep",
    }
    assert Pass(quick, 1).due_at == 0.0  # a new scheduler runs every pass at once
