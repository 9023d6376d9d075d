"""``crawl_site``: breadth-first crawl of one host, politely and within the address rules."""

from __future__ import annotations

from collections import deque
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobs.addresses import AddressRefused, check_url
from jobs.registry import ToolCancelled, ToolContext, tool
from jobs.tools.outgoing_http import (
    USER_AGENT,
    FetchFailed,
    fetch_checked,
    http_client,
    is_ip_literal,
)
from jobs.tools.running import seconds_left, sleep_unless_cancelled, stop_requested, tool_input

PAGE_MAX_BYTES = 2_000_000
PAGE_TIMEOUT_S = 15.0
ROBOTS_MAX_BYTES = 500_000
MAX_CRAWL_DELAY_S = 5.0
SKIPPED_TEXT_TAGS = {"script", "style", "noscript", "template"}


class CrawlSiteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        max_length=2000,
        description=(
            "Where to start, an http or https URL. Only pages on this URL's host are "
            "crawled; robots.txt is respected; private and loopback addresses are refused."
        ),
    )
    max_pages: int = Field(
        default=20, ge=1, le=500, description="Stop after fetching this many pages."
    )

    @field_validator("url")
    @classmethod
    def url_is_allowed(cls, value: str) -> str:
        """Refuse what can be refused without DNS; names are checked when the crawl runs.

        A job may start long after it was created (``depends_on``), and whether a
        name resolves then is what matters; a DNS hiccup is no argument error.
        """
        url = normalized(value)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the URL must be an http or https URL with a host")
        if is_ip_literal(parts.hostname):
            try:
                check_url(url)
            except AddressRefused as exc:
                raise ValueError(str(exc)) from exc
        return url


def normalized(url: str) -> str:
    """Drop the fragment and give an empty path a slash, so one page has one URL."""
    parts = urlsplit(url.strip())
    return urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, "")
    )


class PageParser(HTMLParser):
    """Title, visible words and link targets of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.words = 0
        self.hrefs: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href.strip())
        if tag in SKIPPED_TEXT_TAGS or tag == "title":
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._open and self._open[-1] == "title":
            self.title += data
        elif not any(tag in SKIPPED_TEXT_TAGS for tag in self._open):
            self.words += len(data.split())


def load_robots(client: httpx.Client, start: str) -> RobotFileParser:
    """robots.txt with urllib.robotparser's rules: 401/403 forbid all, other errors allow all."""
    parts = urlsplit(start)
    robots_url = urlunsplit((parts.scheme, parts.netloc, "/robots.txt", "", ""))
    robots = RobotFileParser(robots_url)
    try:
        fetched = fetch_checked(
            client, robots_url, max_bytes=ROBOTS_MAX_BYTES, timeout_s=PAGE_TIMEOUT_S
        )
    except (FetchFailed, AddressRefused):
        robots.parse([])  # no rules: everything allowed
        return robots
    if fetched.status in (401, 403):
        robots.parse(["User-agent: *", "Disallow: /"])
    elif fetched.status >= 400:
        robots.parse([])
    else:
        robots.parse(fetched.text().splitlines())
    return robots


def same_host_links(base: str, hrefs: list[str], host: str) -> list[str]:
    links: list[str] = []
    for href in hrefs:
        target = normalized(urljoin(base, href))
        parts = urlsplit(target)
        if parts.scheme in ("http", "https") and parts.netloc == host and target not in links:
            links.append(target)
    return links


def crawl_page(client: httpx.Client, url: str, host: str, timeout_s: float) -> dict[str, Any]:
    """Fetch one page; failures become part of the page record, not exceptions."""
    page: dict[str, Any] = {"url": url, "status": None, "title": "", "words": 0, "links": 0}
    try:
        fetched = fetch_checked(
            client, url, max_bytes=PAGE_MAX_BYTES, timeout_s=timeout_s, same_host=host
        )
    except AddressRefused as exc:
        return {**page, "error": f"refused: {exc}", "new_links": []}
    except FetchFailed as exc:
        return {**page, "error": str(exc), "new_links": []}
    page["status"] = fetched.status
    if fetched.redirect_not_followed:
        page["redirected_to"] = fetched.redirect_not_followed
    elif fetched.url != url:
        page["final_url"] = fetched.url
    links: list[str] = []
    if fetched.content_type in ("text/html", "application/xhtml+xml"):
        parser = PageParser()
        parser.feed(fetched.text())
        links = same_host_links(fetched.url, parser.hrefs, host)
        page.update(
            title=" ".join(parser.title.split())[:300], words=parser.words, links=len(parser.hrefs)
        )
    return {**page, "new_links": links}


def crawl_site(args: Any, ctx: ToolContext) -> dict[str, Any]:
    params = tool_input(CrawlSiteInput, args)
    start = check_url(params.url)  # raises AddressRefused: the job fails with the reason
    host = urlsplit(start).netloc
    pages: list[dict[str, Any]] = []
    blocked: list[str] = []
    queue, seen = deque([start]), {start}
    with http_client() as client:
        ctx.progress(0.0, f"reading {host}/robots.txt")
        robots = load_robots(client, start)
        delay = min(float(robots.crawl_delay(USER_AGENT) or 0), MAX_CRAWL_DELAY_S)
        while queue and len(pages) < params.max_pages:
            if stop_requested(ctx):
                raise ToolCancelled()
            url = queue.popleft()
            if not robots.can_fetch(USER_AGENT, url):
                blocked.append(url)
                continue
            if delay and pages:
                sleep_unless_cancelled(ctx, delay)
            left = seconds_left(ctx)
            timeout = PAGE_TIMEOUT_S if left is None else max(min(PAGE_TIMEOUT_S, left), 0.1)
            page = crawl_page(client, url, host, timeout)
            for link in page.pop("new_links"):
                if link not in seen:
                    seen.add(link)
                    queue.append(link)
            pages.append(page)
            ctx.partial(page)
            expected = min(params.max_pages, len(pages) + len(queue))
            ctx.progress(len(pages) / expected, f"{len(pages)}/{expected} {url}")
    return crawl_output(start, host, pages, blocked)


def crawl_output(
    start: str, host: str, pages: list[dict[str, Any]], blocked: list[str]
) -> dict[str, Any]:
    ok = sum(1 for p in pages if p["status"] is not None and p["status"] < 400)
    failed = [p["url"] for p in pages if p["status"] is None or p["status"] >= 400]
    summary = f"crawled {len(pages)} pages on {host}: {ok} ok"
    if failed:
        summary += f", {len(failed)} failed ({', '.join(failed[:3])}"
        summary += f", +{len(failed) - 3} more)" if len(failed) > 3 else ")"
    if blocked:
        summary += f", {len(blocked)} blocked by robots.txt"
    return {
        "summary": summary,
        "start_url": start,
        "host": host,
        "pages_crawled": len(pages),
        "ok": ok,
        "failed": len(failed),
        "blocked_by_robots": blocked,
        "words": sum(p["words"] for p in pages),
        "pages": pages,
    }


crawl_site_tool = tool(
    name="crawl_site",
    description=(
        "Crawl a website breadth-first from a start URL, staying on that host and obeying "
        "robots.txt, up to max_pages pages. Returns at once with a job; each page (URL, HTTP "
        "status, title, word count, number of links) is reported as it is fetched, and the "
        "result arrives later as an event with a one-line summary."
    ),
    input_model=CrawlSiteInput,
    kind="async",
    approval="always",
    default_timeout_s=300.0,
    max_timeout_s=1800.0,
)(crawl_site)
