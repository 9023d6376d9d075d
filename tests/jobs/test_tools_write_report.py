"""write_report: sections as partial results, composed deterministically from source jobs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from jobs import hooks
from jobs.models import Job
from jobs.registry import ToolCancelled
from jobs.tools.context import LocalToolContext
from jobs.tools.run_tests import run_tests_tool as RUN_TESTS
from jobs.tools.write_report import write_report_tool as WRITE_REPORT

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def demo_test_result() -> dict[str, Any]:
    """A real run of the demo suite: 31 passed, 2 failed."""
    return RUN_TESTS.run({}, LocalToolContext())


def finished_job(owner: Any, tool: str, status: str, result: Any = None, error: str = "") -> Job:
    return Job.objects.create(
        owner=owner,
        tool=tool,
        args={},
        timeout_s=60,
        status=status,
        result=result,
        error_message=error,
    )


@override_settings(AGENTSITE_REPORT_SECTION_DELAY_S=0)
def test_a_report_without_sources_has_a_summary_findings_and_next_steps(user: Any) -> None:
    ctx = LocalToolContext(owner_id=user.pk)
    result = WRITE_REPORT.run({"topic": "checkout reliability"}, ctx)

    assert [s["heading"] for s in result["sections"]] == ["Summary", "Findings", "Next steps"]
    assert ctx.partials == result["sections"]
    assert [p["index"] for p in ctx.partials] == [0, 1, 2]
    assert result["title"] == "Report: checkout reliability"
    assert result["markdown"].startswith("# Report: checkout reliability\n\n## Summary\n\n")
    assert result["summary"] == (
        "Report: checkout reliability: 3 sections, 0 finding(s), from 0 source job(s)"
    )
    assert result["model"] == "offline"


@override_settings(AGENTSITE_REPORT_SECTION_DELAY_S=0)
def test_failing_tests_become_findings_and_next_steps(
    user: Any, demo_test_result: dict[str, Any]
) -> None:
    source = finished_job(user, "run_tests", "done", demo_test_result)
    ctx = LocalToolContext(owner_id=user.pk)
    result = WRITE_REPORT.run(
        {"topic": "the shop", "source_job_ids": [source.id], "title": "Shop health"}, ctx
    )

    sections = {s["heading"]: s["markdown"] for s in result["sections"]}
    assert list(sections) == [
        "Summary",
        f"Test results ({source.id})",
        "Findings",
        "Next steps",
    ]
    assert f"`{source.id}` run_tests (done): 31 passed, 2 failed" in sections["Summary"]
    assert "| 31 | 2 | 0 | 0 |" in sections[f"Test results ({source.id})"]
    assert sections["Findings"] == (
        "1. Test `tests/test_pricing.py::test_discount_above_100_percent_is_capped` fails: "
        "assert -200 == 0 + where -200 = apply_discount(1000, 120)\n"
        "2. Test `tests/test_pricing.py::test_bulk_discount_starts_at_the_threshold` fails: "
        "assert 0 == 5 + where 0 = bulk_discount_percent(10)"
    )
    assert sections["Next steps"] == (
        "- Fix the 2 failing test(s) in `tests/test_pricing.py`, then run the tests again."
    )
    assert result["summary"] == "Shop health: 4 sections, 2 finding(s), from 1 source job(s)"


@override_settings(AGENTSITE_REPORT_SECTION_DELAY_S=0)
def test_the_offline_composition_is_deterministic(
    user: Any, demo_test_result: dict[str, Any]
) -> None:
    source = finished_job(user, "run_tests", "done", demo_test_result)
    args = {"topic": "the shop", "source_job_ids": [source.id]}

    first = WRITE_REPORT.run(args, LocalToolContext(owner_id=user.pk))
    second = WRITE_REPORT.run(args, LocalToolContext(owner_id=user.pk))

    assert first == second


@override_settings(AGENTSITE_REPORT_SECTION_DELAY_S=0)
def test_a_source_that_did_not_finish_is_a_finding(user: Any) -> None:
    source = finished_job(user, "crawl_site", "timed_out", error="Deadline passed.")
    result = WRITE_REPORT.run(
        {"topic": "docs site", "source_job_ids": [source.id]}, LocalToolContext(owner_id=user.pk)
    )

    sections = {s["heading"]: s["markdown"] for s in result["sections"]}
    assert sections["Findings"] == (
        f"1. Job `{source.id}` (crawl_site) did not finish: timed_out. Deadline passed."
    )
    assert (
        sections["Next steps"] == f"- Run `crawl_site` again (job `{source.id}` ended timed_out)."
    )


def test_another_owners_job_cannot_be_a_source(user: Any, other_user: Any) -> None:
    theirs = finished_job(other_user, "run_tests", "done", {"summary": "1 passed"})

    with pytest.raises(ValueError, match=f"unknown source job\\(s\\): {theirs.id}"):
        WRITE_REPORT.run(
            {"topic": "spying", "source_job_ids": [theirs.id]}, LocalToolContext(owner_id=user.pk)
        )


class CancelAfterFirstSection(LocalToolContext):
    def partial(self, item: Any) -> int:
        index = super().partial(item)
        self.cancel()
        return index


def test_cancelling_stops_between_sections(user: Any) -> None:
    ctx = CancelAfterFirstSection(owner_id=user.pk)

    with pytest.raises(ToolCancelled):
        WRITE_REPORT.run({"topic": "anything"}, ctx)

    assert [p["heading"] for p in ctx.partials] == ["Summary"]


def test_source_ids_must_look_like_job_ids() -> None:
    with pytest.raises(ValueError, match="not job ids: ses_1"):
        WRITE_REPORT.validate({"topic": "x", "source_job_ids": ["ses_1"]})


@override_settings(AGENTSITE_REPORT_SECTION_DELAY_S=0)
def test_a_session_on_a_claude_model_has_it_rewrite_each_section(user: Any, settings: Any) -> None:
    from sessions.services import session_create
    from tests.sessions.messages_server import MessagesServer

    settings.AGENTSITE_ALLOWED_MODELS = ["offline", "claude-test-model"]
    session = session_create(owner=user, model="claude-test-model")
    with MessagesServer() as server:
        settings.ANTHROPIC_BASE_URL = server.url
        settings.ANTHROPIC_API_KEY = "sk-test-key"
        server.replies = [{"text": f"Prose for section {n}."} for n in range(3)]
        ctx = LocalToolContext(owner_id=user.pk, session_id=session.id)
        result = WRITE_REPORT.run({"topic": "latency"}, ctx)

    assert [s["markdown"] for s in result["sections"]] == [
        "Prose for section 0.",
        "Prose for section 1.",
        "Prose for section 2.",
    ]
    assert result["model"] == "claude-test-model"
    assert [r["model"] for r in server.requests] == ["claude-test-model"] * 3
    first_prompt = json.dumps(server.requests[0]["messages"])
    assert "Section: Summary" in first_prompt
    assert "without source jobs" in first_prompt


class UpperCaseModel:
    name = "upper"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def write(self, *, system: str, prompt: str) -> str:
        self.prompts.append(prompt)
        return f"SECTION {len(self.prompts)}"


@override_settings(AGENTSITE_REPORT_SECTION_DELAY_S=0)
def test_the_model_comes_from_the_context_through_the_session_model_hook(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = UpperCaseModel()
    asked: list[str] = []

    def session_model(*, session_id: str) -> UpperCaseModel:
        asked.append(session_id)
        return model

    monkeypatch.setattr(hooks, "_registered", hooks.Hooks(session_model=session_model))
    in_session = WRITE_REPORT.run(
        {"topic": "hooks"}, LocalToolContext(owner_id=user.pk, session_id="ses_1")
    )
    alone = WRITE_REPORT.run({"topic": "hooks"}, LocalToolContext(owner_id=user.pk))

    assert asked == ["ses_1"]  # a job outside any session never asks
    assert in_session["model"] == "upper" and alone["model"] == "offline"
    assert [s["markdown"] for s in in_session["sections"]] == [
        "SECTION 1",
        "SECTION 2",
        "SECTION 3",
    ]
    assert "Section: Summary" in model.prompts[0]
