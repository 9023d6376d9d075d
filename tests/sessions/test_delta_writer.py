"""Streamed text becomes few deltas however slow the database is, and none is lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

import pytest
from asgiref.sync import sync_to_async

from sessions import loop
from sessions.loop import DeltaWriter
from sessions.models import Event, Run
from tests.sessions.factories import make_session

pytestmark = pytest.mark.django_db(transaction=True)


class SlowDatabase:
    """A turn runtime whose every database call takes ``delay_s`` more (a loaded server)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0

    async def db(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return await sync_to_async(fn, thread_sensitive=False)(**kwargs)


def running_run(user: Any) -> Run:
    """A run row to write under; never queued, so no worker of another test takes it."""
    session = make_session(user)
    return Run.objects.create(session=session, owner=user, status=Run.Status.RUNNING)


def deltas(run: Run) -> list[str]:
    rows = Event.objects.filter(run=run, kind=Event.Kind.ASSISTANT_DELTA).order_by("seq")
    return [e.payload["text"] for e in rows]


async def stream(writer: DeltaWriter, pieces: list[str], gap_s: float) -> float:
    """Feed pieces as a model would; the longest time one ``add`` kept the stream waiting."""
    longest = 0.0
    for piece in pieces:
        started = time.monotonic()
        await writer.add(piece)
        longest = max(longest, time.monotonic() - started)
        await asyncio.sleep(gap_s)
    await writer.flush()
    await writer.close()
    return longest


def test_a_slow_database_makes_deltas_fewer_not_more(user: Any) -> None:
    # Before: each write blocked the stream and, being slower than the flush
    # interval, made the next piece flush at once: one row per two words.
    run = running_run(user)
    pieces = [f"word{i} " for i in range(60)]
    slow = SlowDatabase(delay_s=4 * loop.FLUSH_EVERY_S)
    writer = DeltaWriter(runtime=slow, session_id=run.session_id, run_id=run.id)  # type: ignore[arg-type]

    longest_wait = asyncio.run(stream(writer, pieces, gap_s=loop.FLUSH_EVERY_S / 10))

    written = deltas(run)
    assert "".join(written) == "".join(pieces)  # every piece, in order, once
    assert len(written) <= 6, written
    assert slow.calls == len(written)
    # The stream never waited for a write.
    assert longest_wait < slow.delay_s


def test_text_waiting_when_the_stream_pauses_is_written_by_the_timer(user: Any) -> None:
    run = running_run(user)
    writer = DeltaWriter(runtime=SlowDatabase(0.0), session_id=run.session_id, run_id=run.id)  # type: ignore[arg-type]

    async def main() -> list[str]:
        await writer.add("first ")
        await writer.add("second ")  # within the interval: waits for the timer
        await asyncio.sleep(10 * loop.FLUSH_EVERY_S)  # the model pauses; no flush() call
        written = await sync_to_async(deltas, thread_sensitive=False)(run)
        await writer.close()
        return written

    assert asyncio.run(main()) == ["first ", "second "]


def test_a_failed_write_fails_the_turn_at_its_next_step(user: Any) -> None:
    run = running_run(user)

    class Broken(SlowDatabase):
        async def db(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
            raise RuntimeError("database went away")

    writer = DeltaWriter(runtime=Broken(0.0), session_id=run.session_id, run_id=run.id)  # type: ignore[arg-type]

    async def main() -> None:
        await writer.add("lost ")
        with pytest.raises(RuntimeError, match="database went away"):
            await writer.flush()

    asyncio.run(main())


def test_flush_returns_only_once_the_last_delta_is_written(user: Any) -> None:
    # Before: a write slower than the flush interval started the next one as it
    # ended, flush() returned without waiting for that one, and the turn's
    # assistant_message and tool calls went into the log ahead of the last delta
    # (a Responses stream then showed a stray message made of that delta).
    run = running_run(user)
    writer = DeltaWriter(
        runtime=SlowDatabase(delay_s=3 * loop.FLUSH_EVERY_S),  # type: ignore[arg-type]
        session_id=run.session_id,
        run_id=run.id,
    )

    async def main() -> list[str]:
        await writer.add("Checking")  # written at once
        await writer.add(".")  # waits behind that write
        await writer.flush()
        written = await sync_to_async(deltas, thread_sensitive=False)(run)
        await writer.append(Event.Kind.ASSISTANT_MESSAGE, {"text": "Checking."})
        await writer.close()
        return written

    assert asyncio.run(main()) == ["Checking", "."]
    kinds = Event.objects.filter(run=run).order_by("seq").values_list("kind", flat=True)
    assert list(kinds) == ["assistant_delta", "assistant_delta", "assistant_message"]


def test_nothing_is_written_after_close(user: Any) -> None:
    run = running_run(user)
    writer = DeltaWriter(runtime=SlowDatabase(0.0), session_id=run.session_id, run_id=run.id)  # type: ignore[arg-type]

    async def main() -> None:
        await writer.add("first ")
        await writer.add("dropped ")  # waits for the timer, which close() stops
        await writer.close()
        await asyncio.sleep(10 * loop.FLUSH_EVERY_S)

    asyncio.run(main())
    assert deltas(run) == ["first "]


def test_the_interval_stretches_with_the_streams_of_a_runtime() -> None:
    streams = loop.TextStreams(writes_per_s=100, db=SlowDatabase(0.0).db)
    assert streams.interval() == loop.FLUSH_EVERY_S
    streams.open = 5
    assert streams.interval() == loop.FLUSH_EVERY_S
    streams.open = 20
    assert streams.interval() == pytest.approx(0.2)
    streams.open = 400
    assert streams.interval() == loop.FLUSH_MAX_S


def test_many_answers_at_once_share_the_runtime_s_write_budget(user: Any) -> None:
    # Before: every answer wrote a delta every FLUSH_EVERY_S however many were
    # streaming, so a worker's delta writes a second grew with its answers.
    runs = [running_run(user) for _ in range(20)]
    streams = loop.TextStreams(
        writes_per_s=40, db=SlowDatabase(0.0).db
    )  # 20 streams: each writes every 0.25 s
    writers = [
        DeltaWriter(
            runtime=cast(Any, SlowDatabase(0.0)),
            session_id=r.session_id,
            run_id=r.id,
            streams=streams,
        )
        for r in runs
    ]
    pieces = [f"w{i} " for i in range(25)]  # 25 pieces 0.02 s apart: half a second

    async def main() -> None:
        await asyncio.gather(*(stream(w, pieces, gap_s=0.02) for w in writers))

    asyncio.run(main())
    assert streams.open == 0  # each stream left the count when it closed
    for r in runs:
        written = deltas(r)
        assert "".join(written) == "".join(pieces)  # every piece, in order, once
        # The first piece at once, then one write every 0.25 s: 3 or 4 rows (6 if
        # the box is slow), where a write every FLUSH_EVERY_S makes 10 or more.
        assert len(written) <= 6, written
    # Alone, the same stream writes every FLUSH_EVERY_S.
    alone = running_run(user)
    writer = DeltaWriter(
        runtime=cast(Any, SlowDatabase(0.0)),
        session_id=alone.session_id,
        run_id=alone.id,
        streams=streams,
    )
    asyncio.run(stream(writer, pieces * 2, gap_s=0.02))
    assert len(deltas(alone)) >= 10


def test_the_deltas_of_answers_due_together_are_written_together(user: Any) -> None:
    # Before: every delta was a trip to a database thread and a commit of its
    # own, however many answers wrote at the same moment.
    runs = [running_run(user) for _ in range(20)]
    database = SlowDatabase(0.0)
    streams = loop.TextStreams(writes_per_s=100, db=database.db)
    writers = [
        DeltaWriter(
            runtime=cast(Any, database), session_id=r.session_id, run_id=r.id, streams=streams
        )
        for r in runs
    ]
    pieces = [f"w{i} " for i in range(25)]

    async def main() -> None:
        await asyncio.gather(*(stream(w, pieces, gap_s=0.02) for w in writers))

    asyncio.run(main())
    rows = 0
    for r in runs:
        written = deltas(r)
        assert "".join(written) == "".join(pieces)  # every piece, in order, once
        rows += len(written)
    # Twenty answers due on the same ticks: a handful of writes for all of them.
    assert database.calls * 4 <= rows, (database.calls, rows)


def test_the_last_delta_and_the_message_after_it_are_one_write(user: Any) -> None:
    # Before: the segment's message was a write of its own after the last delta's.
    run = running_run(user)
    database = SlowDatabase(0.0)
    writer = DeltaWriter(runtime=cast(Any, database), session_id=run.session_id, run_id=run.id)

    async def main() -> None:
        await writer.add("Checking")  # written at once
        await writer.add(".")  # waits for the next tick
        await writer.flush_then(Event.Kind.ASSISTANT_MESSAGE, {"text": "Checking."})
        await writer.close()

    asyncio.run(main())
    rows = Event.objects.filter(run=run).order_by("seq").values_list("kind", "payload")
    assert list(rows) == [
        ("assistant_delta", {"text": "Checking"}),
        ("assistant_delta", {"text": "."}),
        ("assistant_message", {"text": "Checking."}),
    ]
    assert database.calls == 2


def test_a_write_comes_due_on_the_first_tick_of_its_runtime_after_the_interval() -> None:
    streams = loop.TextStreams(writes_per_s=100, db=SlowDatabase(0.0).db)
    streams.phase = 0.0
    assert streams.next_write_at(10.0) == pytest.approx(10.05)  # on a tick: not the next
    assert streams.next_write_at(10.01) == pytest.approx(10.1)
    # Each runtime has ticks of its own: turn workers of one host, sharing a clock, do
    # not all write on the same instants.
    streams.phase = 0.02
    assert streams.next_write_at(10.0) == pytest.approx(10.07)
    phases = {loop.TextStreams(100, db=SlowDatabase(0.0).db).phase for _ in range(10)}
    assert len(phases) > 1
    assert all(0 <= phase < loop.FLUSH_EVERY_S for phase in phases)
