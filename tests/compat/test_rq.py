"""agentsite.compat.rq: the RQ internals agentsite's workers build on are still there."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator

import pytest
from redis import Redis
from rq import Queue
from rq.worker import Worker

from agentsite.compat import rq as rq_internals
from agentsite.core.workers import RidesOutRedis
from agentsite.management.commands.scheduler import Scheduler
from jobs.worker import JobWorker
from sessions.worker import TurnWorker
from tests.compat.internals import assigned_attributes, method, module_tree, parameters


def rq_class(path: str) -> type:
    module, name = path.rsplit(".", 1)
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def listed() -> Iterator[tuple[str, str, list[str]]]:
    for table in (rq_internals.OVERRIDDEN, rq_internals.CALLED):
        for path, methods in table.items():
            for name, arguments in methods.items():
                yield path, name, arguments


@pytest.mark.parametrize(("path", "name", "arguments"), list(listed()))
def test_each_method_relied_on_keeps_its_signature(
    path: str, name: str, arguments: list[str]
) -> None:
    function = getattr(rq_class(path), name, None)
    assert function is not None, f"{path}.{name} is gone"
    assert parameters(function) == arguments, f"{path}.{name} changed its parameters"


@pytest.mark.parametrize(
    ("ours", "path"),
    [
        (RidesOutRedis, "rq.worker.Worker"),
        (JobWorker, "rq.worker.Worker"),
        (TurnWorker, "rq.worker.Worker"),
        (Scheduler, "django_rq.cron.DjangoCronScheduler"),
    ],
)
def test_every_rq_method_a_worker_overrides_is_listed(ours: type, path: str) -> None:
    """A new override of an RQ method must be added to the table (and so checked)."""
    upstream = rq_class(path)
    overridden = {
        name
        for name, value in vars(ours).items()
        if callable(value)
        and not isinstance(value, type)  # options such as death_penalty_class
        and not name.startswith("__")
        and hasattr(upstream, name)
    }
    assert overridden - set(rq_internals.OVERRIDDEN[path]) == set()


def test_the_worker_attributes_used_are_still_set_by_rq() -> None:
    assert set(rq_internals.WORKER_ATTRIBUTES) <= assigned_attributes(Worker)


@pytest.fixture
def worker() -> Iterator[Worker]:
    from django.conf import settings

    connection = Redis.from_url(settings.REDIS_URL)
    yield Worker([Queue("compat", connection=connection)], connection=connection)
    connection.close()


def test_the_stop_flag_is_the_one_rqs_work_loop_reads(worker: Worker) -> None:
    work = method(module_tree("rq.worker.base"), "BaseWorker", "work")
    assert "self._stop_requested" in ast.unparse(work)
    assert not rq_internals.stop_requested(worker)
    rq_internals.request_stop(worker)
    assert rq_internals.stop_requested(worker)


def test_horse_bookkeeping_lands_on_rqs_attributes(worker: Worker) -> None:
    rq_internals.set_horse_pid(worker, 4321)
    assert worker.horse_pid == 4321
    rq_internals.become_horse(worker)
    assert worker.is_horse
