"""RQ's loggers in agentsite's workers are no chattier than LOG_LEVEL (the root logger).

`manage.py rqworker` asks RQ for INFO at its default verbosity: three lines for every
job, even with LOG_LEVEL=WARNING. daphne under `manage.py serve` follows LOG_LEVEL too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.conf import settings
from redis import Redis
from rq import Queue
from rq.worker import SimpleWorker

from agentsite.core.workers import RidesOutRedis, log_level_at_least_root
from agentsite.management.commands.serve import daphne_verbosity


class Worker(RidesOutRedis, SimpleWorker):
    pass


def job_done() -> str:
    return "done"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.levels: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.levels.append(record.levelno)


@pytest.fixture
def root_level() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    before = root.level
    yield root
    root.setLevel(before)


@pytest.fixture
def rq_records() -> Iterator[Records]:
    logger = logging.getLogger("rq.worker")
    level, records = logger.level, Records()
    logger.addHandler(records)
    yield records
    logger.removeHandler(records)
    logger.setLevel(level)


def run_one_job(name: str) -> None:
    connection = Redis.from_url(settings.REDIS_URL)
    try:
        queue = Queue(name, connection=connection)
        job = queue.enqueue(job_done)
        Worker([queue], connection=connection).work(burst=True, logging_level="INFO")
        job.refresh()
        assert job.get_status() == "finished"
        queue.delete(delete_jobs=True)
    finally:
        connection.close()


def test_a_worker_asked_for_info_logs_nothing_below_a_warning_root(
    root_level: logging.Logger, rq_records: Records
) -> None:
    root_level.setLevel(logging.WARNING)
    run_one_job("logging-test-warning")
    assert logging.getLogger("rq.worker").level == logging.WARNING
    assert rq_records.levels == []


def test_at_info_the_worker_logs_its_jobs_as_rq_does(
    root_level: logging.Logger, rq_records: Records
) -> None:
    root_level.setLevel(logging.INFO)
    run_one_job("logging-test-info")
    assert logging.INFO in rq_records.levels


def test_levels_are_raised_to_the_root_never_lowered(root_level: logging.Logger) -> None:
    root_level.setLevel(logging.WARNING)
    assert log_level_at_least_root("INFO") == logging.WARNING
    assert log_level_at_least_root("error") == logging.ERROR
    assert log_level_at_least_root(None) == logging.WARNING
    root_level.setLevel(logging.DEBUG)
    assert log_level_at_least_root("debug") == logging.DEBUG
    assert log_level_at_least_root(None) == logging.INFO
    assert log_level_at_least_root("no-such-level") == logging.INFO


@pytest.mark.parametrize(
    ("level", "verbosity"), [(logging.DEBUG, 2), (logging.INFO, 1), (logging.WARNING, 0)]
)
def test_daphne_logs_requests_at_info_only(
    root_level: logging.Logger, level: int, verbosity: int
) -> None:
    root_level.setLevel(level)
    assert daphne_verbosity() == verbosity
