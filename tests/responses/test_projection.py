"""The projection alone: which events belong to a response, and the same stream on every read.

No database: the facts the projection asks for are given by the test.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from responses.projection import Header, ResponseProjection, StreamEvent

INPUT_SEQ = 3


class Facts:
    def __init__(self, batches: dict[str, set[int]], jobs: dict[str, str]) -> None:
        self.batches, self.jobs = batches, jobs
        self.cancel: int | None = None

    def batch_seqs(self, run_id: str) -> set[int]:
        return self.batches.get(run_id, set())

    def job_run(self, job_id: str) -> str | None:
        return self.jobs.get(job_id)

    def usage(self, run_ids: Iterable[str]) -> dict[str, int]:
        return {"input_tokens": 10 * len(list(run_ids)), "output_tokens": 1}

    def cancel_seq(self, response_id: str) -> int | None:
        return self.cancel


def projection(facts: Facts, cancel_seq: int | None = None) -> ResponseProjection:
    header = Header(
        id="resp_test",
        created_at=0,
        model="offline",
        instructions=None,
        metadata={},
        background=True,
        previous_response_id=None,
        input_seq=INPUT_SEQ,
        cancel_seq=cancel_seq,
    )
    return ResponseProjection(header=header, facts=facts)  # type: ignore[arg-type]


def log(*events: tuple[str, dict[str, Any], str | None]) -> list[dict[str, Any]]:
    return [
        {"seq": INPUT_SEQ + n, "kind": kind, "payload": payload, "run_id": run_id}
        for n, (kind, payload, run_id) in enumerate(events)
    ]


def job_log() -> list[dict[str, Any]]:
    """A user message (3) taken by run_a, which starts job_1; a browser message (10) is
    answered by run_b; job_1's end (12) is taken by run_c with a second browser message."""
    return log(
        ("user_message", {"text": "run the tests"}, None),  # 3
        ("run_started", {"run_id": "run_a"}, "run_a"),  # 4
        ("assistant_delta", {"text": "Starting "}, "run_a"),  # 5
        ("assistant_message", {"text": "Starting "}, "run_a"),  # 6
        ("tool_call", {"id": "t1", "name": "start_run_tests", "input": {}}, "run_a"),  # 7
        (
            "tool_result",
            {"tool_call_id": "t1", "output": {"job_id": "job_1", "status": "queued"}},
            "run_a",
        ),  # 8
        ("run_finished", {"run_id": "run_a", "status": "completed"}, "run_a"),  # 9
        ("user_message", {"text": "hello from the browser"}, None),  # 10
        ("run_started", {"run_id": "run_b"}, "run_b"),  # 11
        ("job_event", {"job_id": "job_1", "status": "done", "summary": "31 passed"}, None),  # 12
        ("assistant_delta", {"text": "Hello browser."}, "run_b"),  # 13
        ("assistant_message", {"text": "Hello browser."}, "run_b"),  # 14
        ("run_finished", {"run_id": "run_b", "status": "completed"}, "run_b"),  # 15
        ("user_message", {"text": "and again"}, None),  # 16
        ("run_started", {"run_id": "run_c"}, "run_c"),  # 17
        ("assistant_delta", {"text": "The tests finished."}, "run_c"),  # 18
        ("assistant_message", {"text": "The tests finished."}, "run_c"),  # 19
        ("run_finished", {"run_id": "run_c", "status": "completed"}, "run_c"),  # 20
    )


def job_facts() -> Facts:
    return Facts(batches={"run_a": {3}, "run_b": {10}, "run_c": {12, 16}}, jobs={"job_1": "run_a"})


def read(p: ResponseProjection, events: list[dict[str, Any]]) -> list[StreamEvent]:
    for event in events:
        p.feed(event)
    p.caught_up(events[-1]["seq"])
    return p.take()


def test_a_turn_that_only_answers_others_is_not_in_the_response() -> None:
    p = projection(job_facts())
    events = read(p, job_log())
    assert p.status == "completed"
    assert p.members == {"run_a", "run_c"}
    assert p.output_text() == "Starting The tests finished."
    assert events[-1]["type"] == "response.completed"
    call = p.response()["output"][1]
    assert call["type"] == "mcp_call" and call["output"] == "31 passed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_it_stays_in_progress_until_the_job_has_been_reported() -> None:
    p = projection(job_facts())
    read(p, job_log()[:-1])
    assert p.status == "in_progress"
    p.feed(job_log()[-1])
    assert p.status == "completed"


def test_read_event_by_event_the_stream_is_the_one_read_at_once() -> None:
    whole = read(projection(job_facts()), job_log())
    live = projection(job_facts())
    pieces: list[StreamEvent] = []
    for event in job_log():
        live.feed(event)
        live.caught_up(event["seq"])
        pieces.extend(live.take())
    assert pieces == whole


def cancelled_log() -> list[dict[str, Any]]:
    """run_a starts job_1 and ends; the job reports progress (10); a cancel is asked
    for then; the job ends cancelled (11) and a turn starts to report it (12)."""
    after = [
        ("job_event", {"job_id": "job_1", "status": "running"}, None),
        ("job_event", {"job_id": "job_1", "status": "cancelled", "error": {"message": "no"}}, None),
        ("run_started", {"run_id": "run_r"}, "run_r"),
    ]
    return job_log()[:7] + [
        {"seq": 10 + n, "kind": kind, "payload": payload, "run_id": run_id}
        for n, (kind, payload, run_id) in enumerate(after)
    ]


def test_a_cancel_ends_it_on_the_same_event_for_a_live_reader_and_a_later_one() -> None:
    facts = Facts(batches={"run_a": {3}, "run_r": {11}}, jobs={"job_1": "run_a"})
    events = cancelled_log()
    facts.cancel = 10
    later = read(projection(facts, cancel_seq=10), events)

    facts.cancel = None
    live = projection(facts)
    seen: list[StreamEvent] = []
    for event in events:
        if event["seq"] == 11:
            facts.cancel = 10  # asked for after seq 10 was written, before 11
        live.feed(event)
        seen.extend(live.take())
    assert seen == later
    assert later[-1]["type"] == "response.cancelled"
    assert "run_r" not in live.members  # the report of the cancel came after the end


def test_a_handed_back_turn_closes_what_its_attempt_wrote() -> None:
    events = log(
        ("user_message", {"text": "hi"}, None),
        ("run_started", {"run_id": "run_a"}, "run_a"),
        ("assistant_delta", {"text": "Half"}, "run_a"),
        ("run_requeued", {"run_id": "run_a", "superseded_after_seq": 4}, "run_a"),
        ("run_started", {"run_id": "run_a"}, "run_a"),
        ("assistant_delta", {"text": "Whole"}, "run_a"),
        ("assistant_message", {"text": "Whole"}, "run_a"),
        ("run_finished", {"run_id": "run_a", "status": "completed"}, "run_a"),
    )
    p = projection(Facts(batches={"run_a": {3}}, jobs={}))
    read(p, events)
    assert p.status == "completed"
    assert [(i["status"], i["content"][0]["text"]) for i in p.response()["output"]] == [
        ("incomplete", "Half"),
        ("completed", "Whole"),
    ]


def test_a_turn_that_takes_two_responses_inputs_is_in_both() -> None:
    # Two responses posted to one session while a turn ran: the next turn takes both.
    events = log(
        ("user_message", {"text": "first"}, None),  # 3: this response's input
        ("user_message", {"text": "second"}, None),  # 4: another response's input
        ("run_started", {"run_id": "run_a"}, "run_a"),
        ("assistant_delta", {"text": "Both answered."}, "run_a"),
        ("assistant_message", {"text": "Both answered."}, "run_a"),
        ("run_finished", {"run_id": "run_a", "status": "completed"}, "run_a"),
    )
    facts = Facts(batches={"run_a": {3, 4}}, jobs={})
    mine = projection(facts)
    read(mine, events)
    other = ResponseProjection(
        header=Header(**{**mine.header.__dict__, "id": "resp_other", "input_seq": 4}),
        facts=facts,  # type: ignore[arg-type]
    )
    read(other, events[1:])
    assert mine.output_text() == other.output_text() == "Both answered."
    assert mine.status == other.status == "completed"


def approval_log() -> list[dict[str, Any]]:
    """run_a's call of run_tests waits for approval (job_1 behind apr_1); a later response
    approves it (13), the job runs and its end (15) is reported by run_b."""
    request: dict[str, Any] = {"id": "apr_1", "kind": "approval", "run_id": "run_a"}
    request |= {"tool_call_id": "t1"}
    request |= {"tool": "run_tests", "arguments": {"path": "tests"}, "job_id": "job_1"}
    waiting = {"job_id": "job_1", "status": "awaiting_approval", "approval_id": "apr_1"}
    return log(
        ("user_message", {"text": "run the tests"}, None),  # 3
        ("run_started", {"run_id": "run_a"}, "run_a"),  # 4
        ("tool_call", {"id": "t1", "name": "start_run_tests", "input": {}}, "run_a"),  # 5
        ("job_event", {"job_id": "job_1", "status": "queued"}, None),  # 6
        ("approval_requested", {**request, "status": "pending"}, None),  # 7
        ("tool_result", {"tool_call_id": "t1", "output": waiting}, "run_a"),  # 8
        ("assistant_delta", {"text": "It waits for your approval."}, "run_a"),  # 9
        ("assistant_message", {"text": "It waits for your approval."}, "run_a"),  # 10
        ("run_finished", {"run_id": "run_a", "status": "completed"}, "run_a"),  # 11
        ("user_message", {"text": "meanwhile, from the browser"}, None),  # 12
        ("approval_decided", {**request, "status": "approved"}, None),  # 13
        ("job_event", {"job_id": "job_1", "status": "running"}, None),  # 14
        ("job_event", {"job_id": "job_1", "status": "done", "summary": "31 passed"}, None),  # 15
        ("run_started", {"run_id": "run_b"}, "run_b"),  # 16
        ("assistant_message", {"text": "The tests finished."}, "run_b"),  # 17
        ("run_finished", {"run_id": "run_b", "status": "completed"}, "run_b"),  # 18
    )


def test_a_request_ends_its_response_and_the_deciding_response_reports_the_job() -> None:
    facts = Facts(batches={"run_a": {3}, "run_b": {12, 15}}, jobs={"job_1": "run_a"})
    events = approval_log()
    asking = projection(facts)
    read(asking, events)
    assert asking.status == "completed" and asking.members == {"run_a"}
    call, request, told = asking.response()["output"]
    assert request == {
        "id": "apr_1",
        "type": "mcp_approval_request",
        "server_label": "agentsite",
        "name": "run_tests",
        "arguments": '{"path": "tests"}',
    }
    assert call["status"] == "completed" and call["approval_request_id"] == "apr_1"
    assert told["type"] == "message"

    header = {**asking.header.__dict__, "id": "resp_decides", "input_seq": 13}
    deciding = ResponseProjection(
        header=Header(**header | {"posts_message": False, "decides": ("apr_1",)}),
        facts=facts,  # type: ignore[arg-type]
    )
    whole = read(deciding, events[10:])
    assert deciding.status == "completed" and deciding.members == {"run_b"}
    ran, report = deciding.response()["output"]
    assert report["type"] == "message" and ran["status"] == "completed"
    assert (ran["name"], ran["output"], ran["approval_request_id"]) == (
        "run_tests",
        "31 passed",
        "apr_1",
    )
    assert deciding.output_text() == "The tests finished."
    # Read live, event by event, the same stream.
    live = ResponseProjection(header=deciding.header, facts=facts)  # type: ignore[arg-type]
    pieces: list[StreamEvent] = []
    for event in events[10:]:
        live.feed(event)
        live.caught_up(event["seq"])
        pieces.extend(live.take())
    assert pieces == whole
