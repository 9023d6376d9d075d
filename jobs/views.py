"""The job pages: one job, and its report read inline or downloaded. Thin: look up, render.

The page follows an unfinished job through the REST API (static/js/job.js).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify
from markdown_it import MarkdownIt

from agentsite.core.errors import NotFound
from jobs.models import Job, JobChunk
from jobs.services import job_get

# "js-default": raw HTML in the source is escaped and javascript:/data: links
# are refused, so model and tool output can never inject markup.
_markdown = MarkdownIt("js-default")
PARTIALS_SHOWN = 200


def markdown_html(text: str) -> SafeString:
    return mark_safe(str(_markdown.render(text)))  # the renderer escapes any HTML in the source


def owned_job_or_404(request: HttpRequest, job_id: str) -> Job:
    try:
        return job_get(owner=request.user, job_id=job_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc


def partial_label(item: Any) -> str:
    """One readable line for a partial result (a test outcome, a crawled page, a section)."""
    if isinstance(item, dict):
        name = next(
            (item[k] for k in ("nodeid", "test", "name", "url", "heading", "title") if item.get(k)),
            None,
        )
        outcome = next((item[k] for k in ("outcome", "status", "result") if k in item), None)
        if name is not None:
            return f"{name} — {outcome}" if outcome is not None else str(name)
    text = json.dumps(item, default=str)
    return text if len(text) <= 200 else text[:199] + "…"


def job_report(job: Job) -> dict[str, str] | None:
    """The markdown report a finished job produced (write_report), if any."""
    result = job.result if job.status == Job.Status.DONE else None
    if isinstance(result, dict) and isinstance(result.get("markdown"), str):
        return {"title": str(result.get("title") or job.id), "markdown": result["markdown"]}
    return None


@login_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = owned_job_or_404(request, job_id)
    report = job_report(job)
    context = {
        "job": job,
        "partials": [
            partial_label(item)
            for item in JobChunk.objects.filter(job=job)
            .order_by("index")
            .values_list("item", flat=True)[:PARTIALS_SHOWN]
        ],
        "report": report,
        "report_html": markdown_html(report["markdown"]) if report else "",
    }
    return render(request, "jobs/job.html", context)


@login_required
def job_report_fragment(request: HttpRequest, job_id: str) -> HttpResponse:
    """The report as an HTML fragment, for reading it inline in the chat."""
    report = job_report(owned_job_or_404(request, job_id))
    if report is None:
        raise Http404("This job has no report.")
    return HttpResponse(markdown_html(report["markdown"]))


@login_required
def job_report_download(request: HttpRequest, job_id: str) -> HttpResponse:
    job = owned_job_or_404(request, job_id)
    report = job_report(job)
    if report is None:
        raise Http404("This job has no report.")
    response = HttpResponse(report["markdown"], content_type="text/markdown; charset=utf-8")
    filename = f"{slugify(report['title'])[:80] or 'report'}-{job.id}.md"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
