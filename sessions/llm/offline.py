"""The offline model: deterministic, no network, and it really drives the tools.

It reads the latest batch (user messages and job events) and plans tool calls
from a few phrases (documented in docs/models.md, "The offline model"); after tool
results come back it explains them in a sentence or two. It keeps track of the
jobs in the conversation by reading its own history, so "status" and "stop"
know which jobs are running. Job events it reads from the payloads their
``job_event`` blocks carry (``sessions.llm.blocks``), not from their text.

Latency can be simulated for benchmarks: a call costs
``call_s + input_tokens * input_token_s`` before the first token and
``output_token_s`` per output token (``settings.AGENTSITE_OFFLINE_LATENCY``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from sessions.llm.base import Finish, StreamItem, TextDelta, ToolUse, approx_tokens
from sessions.llm.blocks import JOB_EVENT_BLOCK, job_event_of, wire_messages
from sessions.llm.names import OFFLINE
from sessions.payloads import JobEventPayload

JOB_ID = re.compile(r"\bjob_[a-z0-9]+\b")

STOP = re.compile(r"\b(stop|cancel|abort|kill)\b")
STATUS = re.compile(
    r"\bstatus\b|how is it going|how's it going|how are (the )?\w+ going|\bprogress\b"
    r"|\bstill running\b|\bis it done\b"
)
RUN_TESTS = re.compile(r"\brun (the |all |all the )?tests?\b|\brun the test suite\b")
CRAWL = re.compile(r"\bcrawl\s+(?:the site\s+|site\s+)?(\S+)", re.IGNORECASE)
REPORT = re.compile(
    r"\b(?:write|make|draft|create|give|prepare|produce)\s+(?:(?:me|us)\s+)?(?:an?\s+|the\s+)?"
    r"report\b(?:\s+(?:on|about)\s+(.+))?",
    re.IGNORECASE,
)
# A report topic that is the tests, or that points back at them ("… and a report on them").
TESTS_TOPIC = re.compile(r"\btests?\b|\btest (?:suite|run|results?)\b")
PRONOUN_TOPIC = re.compile(r"(?:them|it|those|these|that|this|the results?)")
TESTS_REPORT_TOPIC = "the test run"
ASK = re.compile(r"\bask me\b\s*(.*)", re.IGNORECASE)
# How a question's outcome starts in the conversation (sessions.conversation.answer_block).
ANSWER = re.compile(r"^\[event\] answer to question (apr_[a-z0-9]+) \((.*?)\): (.*)$", re.DOTALL)
RESULT = re.compile(
    r"\b(results?|failed|failures?|failing|details|what did|which|found|find|output|passed)\b"
)

HELP = (
    "I can run the tests (\u201crun the tests\u201d), crawl a site (\u201ccrawl "
    "https://example.com\u201d), write a report (\u201cwrite a report on <topic>\u201d), "
    "tell you how jobs are going (\u201cstatus\u201d), stop them (\u201cstop\u201d) and "
    "answer questions about their results. Long jobs run in the background, so you can "
    "keep talking to me meanwhile. Running tests, crawling and fetching pages wait for "
    "your approval first."
)

# The codes of a job cancelled because its approval was refused, or never came.
REFUSED = {"approval_rejected", "approval_expired", "approval_cancelled"}

REPORT_PHRASES = {
    "run_tests": "The tests finished: {summary}.",
    "crawl_site": "The crawl finished: {summary}.",
    "write_report": "The report is ready: {summary}.",
}


@dataclass
class JobMemory:
    """What the conversation says about one job."""

    job_id: str
    tool: str
    status: str = "queued"


@dataclass
class Plan:
    text: list[str] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class OfflineModel:
    name = OFFLINE

    async def stream(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[StreamItem]:
        call_s, input_token_s, output_token_s = settings.AGENTSITE_OFFLINE_LATENCY
        # Priced as a real model would read it: job events as their text.
        wired = wire_messages(messages)
        input_tokens = approx_tokens(system) + approx_tokens(wired) + approx_tokens(tools)
        plan = plan_reply(messages, tools)
        text = " ".join(plan.text)
        delay = call_s + input_tokens * input_token_s
        if delay > 0:
            await asyncio.sleep(delay)
        output_tokens = 0
        for piece in pieces(text):
            tokens = approx_tokens(piece)
            output_tokens += tokens
            if output_token_s > 0:
                await asyncio.sleep(tokens * output_token_s)
            yield TextDelta(piece)
        for i, (name, args) in enumerate(plan.calls):
            output_tokens += approx_tokens(args) + 5
            yield ToolUse(id=f"toolu_off_{len(messages)}_{i}", name=name, input=args)
        stop = "tool_use" if plan.calls else "end_turn"
        yield Finish(
            stop_reason=stop, usage={"input_tokens": input_tokens, "output_tokens": output_tokens}
        )


def pieces(text: str, words: int = 2) -> list[str]:
    """Small streaming pieces: a couple of words each, spaces kept."""
    parts = re.findall(r"\S+\s*", text)
    return ["".join(parts[i : i + words]) for i in range(0, len(parts), words)]


def plan_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Plan:
    jobs = remember_jobs(messages)
    last = messages[-1] if messages else {"role": "user", "content": ""}
    blocks = content_blocks(last)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    fresh = [b for b in blocks if b.get("type") in ("text", JOB_EVENT_BLOCK)]
    # Results alone are a follow-up call; results closed before new input are history.
    if results and not fresh:
        plan = explain_results(results, tool_uses(messages), jobs)
        follow_up = report_on_started_tests(messages, tools)
        if follow_up is not None:
            plan.text.append("The report will be written from it once the tests are done.")
            plan.calls.append(follow_up)
        return plan
    plan = Plan()
    tool_names = {t["name"] for t in tools}
    for block in blocks:
        event = job_event_of(block)
        answered = ANSWER.match(str(block.get("text", ""))) if block.get("type") == "text" else None
        if event is not None:
            plan.text.append(report_event(event))
        elif answered is not None:
            plan.text.append(f"Thank you: {answered.group(3).removeprefix('the user ')}")
        elif block.get("type") == "text":
            respond_to_user(str(block.get("text", "")), plan, jobs, tools, tool_names)
    if not plan.text and not plan.calls:
        plan.text.append(HELP)
    return plan


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content", "")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)]


def tool_uses(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        b["id"]: b
        for m in messages
        if m.get("role") == "assistant"
        for b in content_blocks(m)
        if b.get("type") == "tool_use"
    }


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content)


def remember_jobs(messages: list[dict[str, Any]]) -> dict[str, JobMemory]:
    """Jobs the conversation mentions, in the order they appeared, with their last state."""
    uses = tool_uses(messages)
    jobs: dict[str, JobMemory] = {}
    for message in messages:
        for block in content_blocks(message):
            if block.get("type") == "tool_result":
                use = uses.get(str(block.get("tool_use_id")), {})
                name = str(use.get("name", ""))
                if name.startswith("start_") and not block.get("is_error"):
                    data = loads(result_text(block))
                    if isinstance(data, dict) and data.get("job_id"):
                        job_id = str(data["job_id"])
                        jobs.setdefault(job_id, JobMemory(job_id, name.removeprefix("start_")))
            elif (event := job_event_of(block)) is not None and event.get("job_id"):
                job_id = str(event["job_id"])
                memory = jobs.setdefault(job_id, JobMemory(job_id, str(event.get("tool"))))
                memory.status = str(event.get("status"))
    return jobs


def loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def report_event(payload: JobEventPayload) -> str:
    """A sentence about a job event: its summary, or the first line of its error."""
    event, job_id, tool = (str(payload.get(key) or "") for key in ("event", "job_id", "tool"))
    if not event.startswith("job_") or not job_id or not tool:
        return "Something happened that I do not recognise."
    summary = first_line(str(payload.get("summary") or "").replace("\n", " "))
    error = payload.get("error") or None
    reason = ""
    if isinstance(error, dict) and error.get("message"):
        reason = first_line(f"{error.get('code')}: {error.get('message')}")
    if event == "job_completed":
        phrase = REPORT_PHRASES.get(tool, f"{tool} finished: {{summary}}.")
        return phrase.format(summary=summary.rstrip(".") or "done")
    if event == "job_failed":
        return f"The {tool} job {job_id} failed: {(reason or summary or 'no reason given')}."
    if event == "job_cancelled" and isinstance(error, dict) and error.get("code") in REFUSED:
        return f"The {tool} job {job_id} did not run. {first_line(str(error.get('message')))}"
    if event == "job_cancelled":
        return f"The {tool} job {job_id} was cancelled."
    if event == "job_timed_out":
        return f"The {tool} job {job_id} ran out of time and was stopped."
    return f"{tool} job {job_id}: {event.removeprefix('job_')}."


def first_line(text: str) -> str:
    return next(iter(text.strip().splitlines()), "").strip()


def respond_to_user(
    text: str,
    plan: Plan,
    jobs: dict[str, JobMemory],
    tools: list[dict[str, Any]],
    tool_names: set[str],
) -> None:
    lowered = text.lower().strip()
    named = [j for j in JOB_ID.findall(lowered)]
    active = [j.job_id for j in jobs.values() if j.status in ("queued", "running")]
    finished = [j.job_id for j in jobs.values() if j.status not in ("queued", "running")]
    asked = ASK.search(text.strip())
    if asked and "ask_user" in tool_names:
        question = asked.group(1).strip().rstrip("?.!") or "What should I do next"
        plan.text.append("I have asked you; answer whenever you like.")
        plan.calls.append(("ask_user", {"question": f"{question[0].upper()}{question[1:]}?"}))
        return
    if STOP.search(lowered) and "stop_job" in tool_names:
        targets = named or active[-1:]
        if not targets:
            plan.text.append("Nothing is running, so there is nothing to stop.")
        for job_id in targets:
            plan.calls.append(("stop_job", {"job_id": job_id}))
        return
    if STATUS.search(lowered) and "get_job_status" in tool_names:
        targets = named or active[-5:] or list(jobs)[-1:]
        if not targets:
            plan.text.append("No jobs have been started in this conversation yet.")
        for job_id in targets:
            plan.calls.append(("get_job_status", {"job_id": job_id}))
        return
    report = REPORT.search(text.strip())
    if report and report_needs_a_test_run(lowered, report, jobs, tool_names):
        plan.text.append(
            "Starting the test run in the background, then a report on it that waits for it."
        )
        plan.calls.append(("start_run_tests", {}))
        return
    if RUN_TESTS.search(lowered) and "start_run_tests" in tool_names:
        plan.text.append("Starting the test run in the background.")
        plan.calls.append(("start_run_tests", {}))
        return
    crawl = CRAWL.search(text.strip())
    if crawl and "start_crawl_site" in tool_names:
        url = crawl.group(1).rstrip(".,;!?")
        if "://" not in url:
            url = f"https://{url}"
        plan.text.append(f"Starting a crawl of {url} in the background.")
        plan.calls.append(("start_crawl_site", {"url": url}))
        return
    if report and "start_write_report" in tool_names:
        topic = report_topic(report) or "the jobs so far"
        args: dict[str, Any] = {"topic": topic}
        sources = [j.job_id for j in jobs.values() if j.status == "done"]
        field_name = source_field(tools)
        if sources and field_name:
            args[field_name] = sources
            plan.text.append(f"Writing a report on {topic} from {len(sources)} earlier job(s).")
        else:
            plan.text.append(f"Writing a report on {topic}.")
        plan.calls.append(("start_write_report", args))
        return
    if "get_job_result" in tool_names and (named or (finished and RESULT.search(lowered))):
        for job_id in named or finished[-1:]:
            plan.calls.append(("get_job_result", {"job_id": job_id}))
        return
    plan.text.append(HELP)


def report_topic(report: re.Match[str]) -> str:
    return (report.group(1) or "").strip().rstrip(".!?").strip()


def report_needs_a_test_run(
    lowered: str, report: re.Match[str], jobs: dict[str, JobMemory], tool_names: set[str]
) -> bool:
    """A report asked for together with a test run, or on tests that have not run yet."""
    if not {"start_run_tests", "start_write_report"} <= tool_names:
        return False
    if RUN_TESTS.search(lowered):
        return True
    tested = any(j.tool == "run_tests" and j.status == "done" for j in jobs.values())
    return not tested and bool(TESTS_TOPIC.search(report_topic(report).lower()))


def report_on_started_tests(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str, dict[str, Any]] | None:
    """The report a request asked for, once the test run it also asked for has started.

    The request is the newest user text; the call is due when this turn started
    ``run_tests`` for it and no report yet. The report names the test run as its
    source and waits for it (``depends_on``).
    """
    asked = [
        (index, str(block.get("text", "")))
        for index, message in enumerate(messages)
        if message.get("role") == "user"
        for block in content_blocks(message)
        if block.get("type") == "text"
    ]
    if not asked:
        return None
    index, text = asked[-1]
    report = REPORT.search(text.strip())
    if report is None:
        return None
    since = messages[index + 1 :]
    uses = tool_uses(since)
    if any(use.get("name") == "start_write_report" for use in uses.values()):
        return None
    tests = [
        data["job_id"]
        for message in since
        for block in content_blocks(message)
        if block.get("type") == "tool_result" and not block.get("is_error")
        if uses.get(str(block.get("tool_use_id")), {}).get("name") == "start_run_tests"
        if isinstance(data := loads(result_text(block)), dict) and data.get("job_id")
    ]
    if not tests:
        return None
    topic = report_topic(report)
    if not topic or PRONOUN_TOPIC.fullmatch(topic.lower()):
        topic = TESTS_REPORT_TOPIC
    args: dict[str, Any] = {"topic": topic}
    source = source_field(tools)
    if source:
        args[source] = tests[-1:]
    if depends_on_offered(tools):
        args["depends_on"] = tests[-1:]
    return "start_write_report", args


def depends_on_offered(tools: list[dict[str, Any]]) -> bool:
    for tool in tools:
        if tool["name"] == "start_write_report":
            return "depends_on" in tool.get("input_schema", {}).get("properties", {})
    return False


def source_field(tools: list[dict[str, Any]]) -> str | None:
    """The write_report argument that takes earlier job ids, whatever it is called."""
    for tool in tools:
        if tool["name"] == "start_write_report":
            props = tool.get("input_schema", {}).get("properties", {})
            for name in ("source_job_ids", "job_ids", "sources", "from_jobs"):
                if name in props:
                    return name
    return None


def explain_results(
    results: list[dict[str, Any]], uses: dict[str, dict[str, Any]], jobs: dict[str, JobMemory]
) -> Plan:
    plan = Plan()
    for block in results:
        use = uses.get(str(block.get("tool_use_id")), {})
        name = str(use.get("name", "tool"))
        data = loads(result_text(block))
        if block.get("is_error"):
            message = data.get("error", {}).get("message") if isinstance(data, dict) else None
            plan.text.append(f"{name} did not work: {message or result_text(block)[:200]}")
        elif name.startswith("start_") and isinstance(data, dict):
            if data.get("status") == "awaiting_approval":
                plan.text.append(
                    f"{name.removeprefix('start_')} ({data.get('job_id')}) waits for your "
                    "approval: approve, edit or reject it here. I will tell you how it went."
                )
                continue
            waits_for = use.get("input", {}).get("depends_on") or []
            if name == "start_write_report" and waits_for:
                plan.text.append(
                    f"Started write_report as {data.get('job_id')}: it waits for "
                    f"{', '.join(map(str, waits_for))}, and the report will be here to read "
                    "and download when it is done."
                )
                continue
            plan.text.append(
                f"Started {name.removeprefix('start_')} as {data.get('job_id')}. I will tell you "
                "when it finishes; meanwhile you can ask me anything."
            )
        elif data and isinstance(data, dict) and data.get("status") == "awaiting_approval":
            plan.text.append(
                f"{name} ({data.get('job_id')}) waits for your approval: approve, edit or "
                "reject it here."
            )
        elif name == "ask_user" and isinstance(data, dict):
            continue
        elif name == "get_job_status" and isinstance(data, dict):
            plan.text.append(describe_status(data))
        elif name == "stop_job" and isinstance(data, dict):
            plan.text.append(f"Asked {data.get('job_id')} to stop: it is {data.get('state')}.")
        elif name == "get_job_result" and isinstance(data, dict):
            plan.text.append(describe_result(use.get("input", {}).get("job_id", ""), data))
        else:
            plan.text.append(f"{name}: {result_text(block)[:300]}")
    return plan


def describe_status(doc: dict[str, Any]) -> str:
    line = f"{doc.get('job_id')} ({doc.get('tool')}) is {doc.get('status')}"
    progress = doc.get("progress") or {}
    if isinstance(progress, dict) and progress.get("fraction") is not None:
        line += f", {round(float(progress['fraction']) * 100)}% done"
    if isinstance(progress, dict) and progress.get("message"):
        line += f" ({progress['message']})"
    return line + "."


def describe_result(job_id: str, data: dict[str, Any]) -> str:
    result = data.get("output", data)
    summary = result.get("summary") if isinstance(result, dict) else None
    line = f"{job_id}: {summary or 'finished'}."
    if isinstance(result, dict):
        failures = result.get("failures")
        if isinstance(failures, list) and failures:
            names = [str(f.get("nodeid", f)) if isinstance(f, dict) else str(f) for f in failures]
            line += " Failing: " + ", ".join(names[:5]) + "."
    items = data.get("items")
    if isinstance(items, list) and items and not summary:
        line = f"{job_id} has {len(items)} partial result(s) so far."
    return line
