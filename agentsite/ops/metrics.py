"""The figures of the whole deployment that ``/metrics`` shows Prometheus.

``/metrics`` is answered by whichever web process a scrape reaches, while the
work happens in many others (tool workers and their work horses, turn
workers, other web processes, on other hosts). So every figure about that work
is read at scrape time from a source all of them share:

- **queues** (depth, age of the oldest queued job, per RQ queue): Redis; the
  tool jobs held back from RQ until a worker slot frees (``jobs.dispatch``)
  and the age of the oldest: the database;
- **jobs and runs by status**: one ``GROUP BY`` each in the database;
- **job durations, turn durations, time to first token**: histograms of the
  rows' own timestamps (``started_at``, ``first_token_at``, ``finished_at``),
  which the lifecycle modules already write. The database is the one record
  every host shares and keeps through a Redis outage; prometheus_client's
  multiprocess mode would only see the processes of the host that answered.
  Rows finished more than ``SETTLE_S`` ago never change, so each process
  counts them once and adds only newer ones, by an index on ``finished_at``;
  every process therefore reports the same cumulative counts;
- **open websockets and SSE streams**: each web process counts its own and
  publishes the count to a Redis hash every ``STREAMS_PUBLISH_S``; a scrape
  sums the fresh entries (a process that died drops out after ``STREAMS_STALE_S``);
- **reconnects** to Redis and the database: a Redis counter, bumped by the
  process that got its connection back.

A scrape never fails for a store that is away: its figures are left out and
``agentsite_redis_up`` / ``agentsite_database_up`` say 0. Request counts and
latencies (django-prometheus) and the process's CPU and memory describe the
web process that answered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, F, FloatField, Func, Model, Q, QuerySet, Sum
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from redis.exceptions import RedisError
from rq import Queue
from rq.job import Job as RqJob

from agentsite.core.telemetry import OPEN_STREAMS, STORES, _key, metrics_redis
from jobs.dispatch import held
from jobs.models import Job
from sessions.models import Run

log = logging.getLogger(__name__)


def go_float(value: float) -> str:
    """A bucket bound as Prometheus writes it (prometheus_client's helper is unannotated)."""
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]


# Rows finished longer ago than this are final: counted once per process.
SETTLE_S = 300.0
# How many of a queue's first jobs are looked at for the oldest (handed-back
# turns go to the front, so the head is not always the oldest).
QUEUE_PEEK = 10

# --- durations from the database ------------------------------------------------------


class SecondsBetween(Func):
    """``end - start`` in seconds, computed by the database itself.

    Django's own datetime subtraction runs a Python function per row on SQLite;
    ``julianday`` keeps the arithmetic in SQLite's own code.
    """

    arity = 2
    output_field = FloatField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "EXTRACT(EPOCH FROM (%(expressions)s))"
        return super().as_sql(compiler, connection, template=template, arg_joiner=" - ", **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "((julianday(%(expressions)s)) * 86400.0)"
        joiner = ") - julianday("
        return super().as_sql(compiler, connection, template=template, arg_joiner=joiner, **extra)


# Per label values: the count at or below each bucket, then the count and the sum.
Tally = dict[tuple[str, ...], list[float]]


@dataclass(frozen=True)
class DurationSeries:
    """A histogram of ``end - start`` over a model's finished rows."""

    name: str
    documentation: str
    model: type[Model]
    start: str
    end: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...]

    def rows(self) -> QuerySet[Any]:
        filled = {f"{field}__isnull": False for field in ("finished_at", self.start, self.end)}
        return self.model._default_manager.filter(**filled)

    def tally(self, rows: QuerySet[Any]) -> Tally:
        aggregates: dict[str, Any] = {
            f"le{i}": Count("pk", filter=Q(seconds__lte=bound))
            for i, bound in enumerate(self.buckets)
        }
        aggregates.update(n=Count("pk"), total=Sum("seconds"))
        rows = rows.annotate(seconds=SecondsBetween(F(self.end), F(self.start)))
        if self.labels:
            found = list(rows.values(*self.labels).annotate(**aggregates).order_by())
        else:
            found = [rows.aggregate(**aggregates)]
        tally: Tally = {}
        for row in found:
            if not row["n"]:
                continue
            key = tuple(str(row[label]) for label in self.labels)
            counts = [float(row[f"le{i}"]) for i in range(len(self.buckets))]
            tally[key] = [*counts, float(row["n"]), float(row["total"] or 0)]
        return tally

    def family(self, tally: Tally) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labels))
        if not tally and not self.labels:
            tally = {(): [0.0] * (len(self.buckets) + 2)}
        for key, values in sorted(tally.items()):
            buckets = [(go_float(b), values[i]) for i, b in enumerate(self.buckets)]
            buckets.append(("+Inf", values[-2]))
            family.add_metric(list(key), buckets, sum_value=values[-1])
        return family


def _add(into: Tally, more: Tally) -> None:
    for key, values in more.items():
        if key in into:
            into[key] = [a + b for a, b in zip(into[key], values, strict=True)]
        else:
            into[key] = list(values)


class DurationHistogram:
    """A ``DurationSeries`` counted over all time: settled rows once, newer ones each scrape."""

    def __init__(self, series: DurationSeries) -> None:
        self.series = series
        self.settled: Tally = {}
        self.settled_until: datetime | None = None
        self.lock = threading.Lock()

    def tally(self, now: datetime) -> Tally:
        cutoff = now - timedelta(seconds=SETTLE_S)
        rows = self.series.rows()
        with self.lock:
            if self.settled_until is None:
                _add(self.settled, self.series.tally(rows.filter(finished_at__lt=cutoff)))
                self.settled_until = cutoff
            elif cutoff > self.settled_until:
                newly = rows.filter(finished_at__gte=self.settled_until, finished_at__lt=cutoff)
                _add(self.settled, self.series.tally(newly))
                self.settled_until = cutoff
            result = {key: list(values) for key, values in self.settled.items()}
            since = self.settled_until
        _add(result, self.series.tally(rows.filter(finished_at__gte=since)))
        return result


JOB_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

DURATIONS = (
    DurationSeries(
        "agentsite_job_duration_seconds",
        "Run time of finished jobs (started to finished), by tool and final status.",
        Job,
        "started_at",
        "finished_at",
        ("tool", "status"),
        JOB_BUCKETS,
    ),
    DurationSeries(
        "agentsite_turn_duration_seconds",
        "Run time of finished model turns (started to finished), by final status.",
        Run,
        "started_at",
        "finished_at",
        ("status",),
        TURN_BUCKETS,
    ),
    DurationSeries(
        "agentsite_turn_time_to_first_token_seconds",
        "Time from a turn's start to the model's first output, counted when the turn ends.",
        Run,
        "started_at",
        "first_token_at",
        (),
        TTFT_BUCKETS,
    ),
)


# --- the collector ----------------------------------------------------------------------


def _up(store: str, up: bool) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        f"agentsite_{store}_up", f"1 when this scrape could read {store}, else 0.", value=int(up)
    )


def _by_status(name: str, what: str, model: type[Model], statuses: list[str]) -> Metric:
    rows = model._default_manager.values_list("status").annotate(n=Count("pk")).order_by()
    counts: dict[str, int] = dict.fromkeys(statuses, 0)
    counts.update({status: n for status, n in rows})
    family = GaugeMetricFamily(name, f"{what} in the database, by status.", labels=["status"])
    for status, n in sorted(counts.items()):
        family.add_metric([status], n)
    return family


def _held_families(now: datetime) -> list[Metric]:
    """The tool jobs waiting in the database for a worker slot (``jobs.dispatch``)."""
    count = GaugeMetricFamily(
        "agentsite_jobs_held",
        "Tool jobs ready to run and waiting in the database for a tool worker's slot.",
    )
    count.add_metric([], held().count())
    oldest = held().values_list("ready_at", flat=True).first()
    age = GaugeMetricFamily(
        "agentsite_jobs_held_oldest_age_seconds",
        "How long the oldest held tool job has waited for a slot (0 when none).",
    )
    age.add_metric([], max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
    return [count, age]


def _oldest_age_s(queue: Queue, now: datetime) -> float:
    ids = queue.get_job_ids(0, QUEUE_PEEK)
    jobs = RqJob.fetch_many(ids, connection=queue.connection) if ids else []
    enqueued = [
        j.enqueued_at.replace(tzinfo=j.enqueued_at.tzinfo or UTC)
        for j in jobs
        if j is not None and j.enqueued_at is not None
    ]
    return max(0.0, (now - min(enqueued)).total_seconds()) if enqueued else 0.0


class DeploymentCollector(Collector):
    """Evaluated at each scrape: figures shared by every process (see the module docstring)."""

    def __init__(self) -> None:
        self.histograms = [DurationHistogram(series) for series in DURATIONS]

    def describe(self) -> list[Metric]:
        return []  # names are not checked for clashes; collecting needs the stores

    def collect(self) -> Iterator[Metric]:
        yield from self.redis_families()
        yield from self.database_families()

    def redis_families(self) -> list[Metric]:
        conn = metrics_redis()
        try:
            depth = GaugeMetricFamily(
                "agentsite_queue_depth", "Jobs waiting in each RQ queue.", labels=["queue"]
            )
            age = GaugeMetricFamily(
                "agentsite_queue_oldest_age_seconds",
                "How long the oldest job waiting in each RQ queue has waited (0 when empty).",
                labels=["queue"],
            )
            now = datetime.now(UTC)
            for name in settings.RQ_QUEUES:
                queue = Queue(name, connection=conn)
                depth.add_metric([name], queue.count)
                age.add_metric([name], _oldest_age_s(queue, now))
            streams = GaugeMetricFamily(
                "agentsite_open_streams",
                "Open websockets and SSE responses, over all web processes.",
                labels=["kind"],
            )
            for kind, n in sorted(OPEN_STREAMS.totals(conn).items()):
                streams.add_metric([kind], n)
            stored: dict[bytes, bytes] = conn.hgetall(_key("reconnects"))  # type: ignore[assignment]
            reconnects = CounterMetricFamily(
                "agentsite_reconnects",
                "Times a process got its connection to a store back after losing it.",
                labels=["store"],
            )
            for store in STORES:
                reconnects.add_metric([store], int(stored.get(store.encode(), 0)))
        except RedisError as exc:
            log.warning("metrics: Redis unreachable (%r)", exc)
            return [_up("redis", False)]
        return [_up("redis", True), depth, age, streams, reconnects]

    def database_families(self) -> list[Metric]:
        try:
            families = [
                _by_status("agentsite_jobs", "Jobs", Job, list(Job.Status.values)),
                _by_status("agentsite_runs", "Model turns (runs)", Run, list(Run.Status.values)),
            ]
            now = timezone.now()
            families += _held_families(now)
            families += [h.series.family(h.tally(now)) for h in self.histograms]
        except DatabaseError as exc:
            log.warning("metrics: database unreachable (%r)", exc)
            return [_up("database", False)]
        return [_up("database", True), *families]


REGISTRY.register(DeploymentCollector())
