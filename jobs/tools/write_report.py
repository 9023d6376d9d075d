"""``write_report``: a multi-section markdown report, optionally from other jobs' results.

The offline composition is deterministic: the same topic and sources always
give the same report (a test run's failures become findings, a crawl's broken
pages too). When the job's session has a model that writes prose
(``ctx.model()``), each section's draft is handed to it to rewrite; the facts
still come from the sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobs.documents import job_summary
from jobs.hooks import TextModel
from jobs.models import Job
from jobs.registry import ToolContext, tool
from jobs.tools.running import sleep_unless_cancelled, tool_input, tool_setting

MAX_SOURCES = 20
MAX_TABLE_ROWS = 50


class WriteReportInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(
        min_length=1, max_length=300, description="What the report is about, in a few words."
    )
    source_job_ids: list[str] = Field(
        default_factory=list,
        max_length=MAX_SOURCES,
        description=(
            "Ids of earlier jobs (e.g. a run_tests or crawl_site job) whose results the report "
            "is written from. Start this job with depends_on set to them so it waits for them."
        ),
    )
    title: str | None = Field(
        default=None, max_length=200, description="The report's title; defaults to the topic."
    )

    @field_validator("source_job_ids")
    @classmethod
    def ids_look_like_jobs(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if not v.startswith("job_") or len(v) > 40]
        if bad:
            raise ValueError(f"not job ids: {', '.join(bad)}")
        return list(dict.fromkeys(value))


@dataclass
class Source:
    job_id: str
    tool: str
    status: str
    summary: str
    result: Any
    error: str


@dataclass
class Section:
    heading: str
    markdown: str


def sources_load(job_ids: list[str], owner_id: int | None) -> list[Source]:
    """The source jobs, in the order given; another owner's job counts as unknown."""
    if not job_ids:
        return []
    jobs = {j.id: j for j in Job.objects.filter(id__in=job_ids, owner_id=owner_id)}
    missing = [job_id for job_id in job_ids if job_id not in jobs]
    if missing:
        raise ValueError(f"unknown source job(s): {', '.join(missing)}")
    return [
        Source(
            job_id=job.id,
            tool=job.tool,
            status=job.status,
            summary=job_summary(job),
            result=job.result if job.status == Job.Status.DONE else None,
            error=job.error_message,
        )
        for job in (jobs[job_id] for job_id in job_ids)
    ]


def cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows[:MAX_TABLE_ROWS]]
    if len(rows) > MAX_TABLE_ROWS:
        lines.append(f"\n…and {len(rows) - MAX_TABLE_ROWS} more.")
    return "\n".join(lines)


def summary_section(topic: str, sources: list[Source]) -> Section:
    if not sources:
        text = (
            f"This report on *{topic}* was written without source jobs, so it holds no "
            "measured facts yet."
        )
        return Section("Summary", text)
    lines = [f"This report on *{topic}* draws on {len(sources)} job(s):", ""]
    lines += [f"- `{s.job_id}` {s.tool} ({s.status}): {s.summary}" for s in sources]
    return Section("Summary", "\n".join(lines))


def run_tests_section(source: Source) -> Section:
    r = source.result
    rows = [
        [r.get(k, 0) for k in ("passed", "failed", "errors", "skipped")] + [r.get("duration_s")]
    ]
    text = f"{r.get('summary', '')} — `{r.get('path', '.')}`\n\n"
    text += table(["passed", "failed", "errors", "skipped", "duration (s)"], rows)
    return Section(f"Test results ({source.job_id})", text)


def crawl_site_section(source: Source) -> Section:
    r = source.result
    rows = [
        [p["url"], p["status"] if p["status"] is not None else "—", p["title"], p["words"]]
        for p in r.get("pages", [])
    ]
    text = f"{r.get('summary', '')}\n\n" + table(["page", "status", "title", "words"], rows)
    return Section(f"Site crawl ({r.get('host', source.job_id)})", text)


def other_sources_section(sources: list[Source]) -> Section:
    lines = [f"- `{s.job_id}` {s.tool} ({s.status}): {s.summary}" for s in sources]
    return Section("Other sources", "\n".join(lines))


def one_line(text: str) -> str:
    """Fit a multi-line message into one list item."""
    return " ".join(text.split())


def findings(sources: list[Source]) -> list[str]:
    found: list[str] = []
    for s in sources:
        if s.result is None:
            found.append(f"Job `{s.job_id}` ({s.tool}) did not finish: {s.status}. {s.error}")
        elif s.tool == "run_tests":
            found += [
                f"Test `{f['nodeid']}` fails: {one_line(f.get('message') or 'no message')}"
                for f in s.result.get("failures", [])
            ]
        elif s.tool == "crawl_site":
            for p in s.result.get("pages", []):
                if p["status"] is None or p["status"] >= 400:
                    found.append(f"Page {p['url']} failed: {p.get('error') or p['status']}")
    return found


def findings_section(sources: list[Source]) -> Section:
    found = findings(sources)
    if not found:
        quiet = "No problems found in the sources." if sources else "No sources, so no findings."
        return Section("Findings", quiet)
    return Section("Findings", "\n".join(f"{i}. {f}" for i, f in enumerate(found, 1)))


def next_steps_section(sources: list[Source]) -> Section:
    steps: list[str] = []
    for s in sources:
        if s.result is None:
            steps.append(f"Run `{s.tool}` again (job `{s.job_id}` ended {s.status}).")
        elif s.tool == "run_tests" and s.result.get("failures"):
            files = sorted({f["nodeid"].split("::", 1)[0] for f in s.result["failures"]})
            steps.append(
                f"Fix the {len(s.result['failures'])} failing test(s) in "
                + ", ".join(f"`{f}`" for f in files)
                + ", then run the tests again."
            )
        elif s.tool == "crawl_site" and s.result.get("failed"):
            steps.append(f"Repair or unlink the {s.result['failed']} page(s) that failed.")
    if not sources:
        steps.append("Gather facts first: start run_tests or crawl_site, then report on them.")
    if not steps:
        steps.append("Nothing to fix; keep the checks running.")
    return Section("Next steps", "\n".join(f"- {step}" for step in steps))


def sections_plan(topic: str, sources: list[Source]) -> list[Section]:
    done = [s for s in sources if s.result is not None]
    known = {"run_tests": run_tests_section, "crawl_site": crawl_site_section}
    plan = [summary_section(topic, sources)]
    plan += [known[s.tool](s) for s in done if s.tool in known]
    others = [s for s in done if s.tool not in known]
    if others:
        plan.append(other_sources_section(others))
    plan += [findings_section(sources), next_steps_section(sources)]
    return plan


def model_rewrite(model: TextModel, topic: str, section: Section) -> str:
    """Have the session's model turn a section's draft into prose, keeping every fact."""
    prompt = (
        f"Report topic: {topic}\nSection: {section.heading}\n\nDraft:\n{section.markdown}\n\n"
        "Rewrite the draft as this section's markdown body. Keep every fact, number, id and "
        "path; add nothing that is not in the draft; no heading."
    )
    written = model.write(
        system="You write clear, factual sections of technical reports.", prompt=prompt
    )
    return written.strip() or section.markdown


def write_report(args: Any, ctx: ToolContext) -> dict[str, Any]:
    params = tool_input(WriteReportInput, args)
    sources = sources_load(params.source_job_ids, ctx.owner_id)
    model = ctx.model()
    delay = float(tool_setting("AGENTSITE_REPORT_SECTION_DELAY_S", "0.5"))
    title = params.title or f"Report: {params.topic}"
    plan = sections_plan(params.topic, sources)
    written: list[dict[str, Any]] = []
    for index, section in enumerate(plan):
        ctx.progress(index / len(plan), f"writing {section.heading}")
        sleep_unless_cancelled(ctx, delay)
        body = model_rewrite(model, params.topic, section) if model else section.markdown
        item = {"index": index, "heading": section.heading, "markdown": body}
        ctx.partial(item)
        written.append(item)
    ctx.progress(1.0, f"{len(written)} sections written")
    markdown = f"# {title}\n\n" + "\n\n".join(
        f"## {s['heading']}\n\n{s['markdown']}" for s in written
    )
    found = len(findings(sources))
    return {
        "summary": f"{title}: {len(written)} sections, {found} finding(s), "
        f"from {len(sources)} source job(s)",
        "title": title,
        "markdown": markdown + "\n",
        "sections": written,
        "source_job_ids": [s.job_id for s in sources],
        "model": model.name if model else "offline",
    }


write_report_tool = tool(
    name="write_report",
    description=(
        "Write a multi-section markdown report on a topic, optionally from the results of "
        "earlier jobs (source_job_ids), e.g. a test run or a crawl: failures become findings "
        "and next steps. Returns at once with a job; each section is reported as it is "
        "written and the whole report arrives later as an event."
    ),
    input_model=WriteReportInput,
    kind="async",
    default_timeout_s=300.0,
    max_timeout_s=1800.0,
)(write_report)
