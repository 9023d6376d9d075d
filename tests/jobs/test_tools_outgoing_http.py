"""http_get and crawl_site against a real local HTTP server, under the address rules."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import ValidationError

from jobs.addresses import AddressRefused
from jobs.registry import ToolCancelled
from jobs.tools.context import LocalToolContext
from jobs.tools.crawl_site import crawl_site_tool as CRAWL_SITE
from jobs.tools.http_get import http_get_tool as HTTP_GET
from jobs.tools.outgoing_http import FetchFailed
from tests.jobs.rebinding import (
    STAND_IN_PUBLIC,
    Rebinding,
    Recorder,
    proxy_from_environment,
    rebinding,
)

__all__ = ["proxy_from_environment", "rebinding"]  # the fixtures, used by name

METADATA = "http://169.254.169.254/latest/meta-data/"
HOME = """<html><head><title>Home  page</title><script>var a = "not words";</script></head>
<body><h1>Welcome to the shop</h1>
<a href="/a">A</a> <a href="b">B</a> <a href="/private/x">secret</a> <a href="/moved">moved</a>
<a href="/evil">evil</a> <a href="/missing">gone</a> <a href="/offhost">away</a>
<a href="/a#top">A again</a> <a href="mailto:x@example.com">mail</a>
<a href="http://other.example/">elsewhere</a></body></html>"""
PAGES = {
    "/a": "<title>Page A</title><p>one two three</p><a href='/'>home</a><a href='/b'>B</a>",
    "/b": "<title>Page B</title><p>four five</p>",
    "/c": "<title>Page C</title><p>moved here</p>",
    "/private/x": "<title>Private</title>",
}
REDIRECTS = {
    "/moved": "/c",
    "/evil": METADATA,
    "/offhost": "http://other.example/landing",
    "/loop": "/loop",
}


class SiteHandler(BaseHTTPRequestHandler):
    requested: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(
        self, status: int, body: bytes, content_type: str = "text/html; charset=utf-8"
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except ConnectionError:
            pass  # the client gave up first, as the timeout tests intend

    def do_GET(self) -> None:
        self.server.requested.append(self.path)  # type: ignore[attr-defined]
        if self.path == "/robots.txt":
            self.send(200, b"User-agent: *\nDisallow: /private\n", "text/plain")
        elif self.path == "/":
            self.send(200, HOME.encode())
        elif self.path in PAGES:
            self.send(200, PAGES[self.path].encode())
        elif self.path in REDIRECTS:
            self.send_response(302)
            self.send_header("Location", REDIRECTS[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/big":
            self.send(200, b"x" * 3_000_000, "text/plain")
        elif self.path == "/slow":
            time.sleep(3)
            self.send(200, b"late", "text/plain")
        else:
            self.send(404, b"<title>Not found</title>")


@pytest.fixture
def site() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SiteHandler)
    server.daemon_threads = True
    server.requested = []  # type: ignore[attr-defined]
    server.base = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


# --- http_get ------------------------------------------------------------------------------


def test_http_get_returns_status_headers_and_text(site: Any) -> None:
    result = HTTP_GET.run({"url": f"{site.base}/a"}, LocalToolContext())

    assert result["status"] == 200
    assert result["content_type"] == "text/html"
    assert "Page A" in result["text"]
    assert result["summary"] == f"200 text/html, {len(PAGES['/a'])} bytes from {site.base}/a"


def test_http_get_cuts_a_large_body_off(site: Any) -> None:
    result = HTTP_GET.run({"url": f"{site.base}/big", "max_bytes": 1000}, LocalToolContext())

    assert result["bytes"] == 1000
    assert result["truncated"] is True
    assert result["text"] == "x" * 1000


def test_http_get_follows_a_redirect_after_checking_it(site: Any) -> None:
    result = HTTP_GET.run({"url": f"{site.base}/moved"}, LocalToolContext())

    assert result["url"] == f"{site.base}/c"
    assert result["redirects"] == [f"{site.base}/c"]
    assert "Page C" in result["text"]


def test_http_get_refuses_a_redirect_to_an_internal_address(site: Any) -> None:
    with pytest.raises(AddressRefused, match=r"169\.254\.169\.254"):
        HTTP_GET.run({"url": f"{site.base}/evil"}, LocalToolContext())


@pytest.mark.parametrize(
    "url", [METADATA, "http://10.1.2.3/", "http://[::1]:8000/", "file:///etc/passwd"]
)
def test_http_get_refuses_internal_addresses_up_front(url: str) -> None:
    with pytest.raises(ValidationError):
        HTTP_GET.validate({"url": url})


def test_http_get_connects_to_the_address_it_checked(rebinding: Rebinding) -> None:
    """DNS rebinding: the checks' lookups say public, a later lookup says loopback."""
    rebinding.checks = 2  # when the job is started, and when it connects
    result = HTTP_GET.run({"url": rebinding.url}, LocalToolContext())

    assert result["status"] == 200
    assert rebinding.internal.seen == []
    assert [seen.path for seen in rebinding.checked.seen] == ["/hook"]
    assert rebinding.lookups == [STAND_IN_PUBLIC, STAND_IN_PUBLIC]


def test_http_get_takes_no_proxy_from_the_environment(
    rebinding: Rebinding, proxy_from_environment: Recorder
) -> None:
    rebinding.checks = 2
    HTTP_GET.run({"url": rebinding.url}, LocalToolContext())

    assert proxy_from_environment.seen == []
    assert len(rebinding.checked.seen) == 1


def test_http_get_gives_up_on_a_slow_server(site: Any) -> None:
    with pytest.raises(FetchFailed, match="ReadTimeout"):
        HTTP_GET.run({"url": f"{site.base}/slow", "timeout_s": 0.5}, LocalToolContext())


def test_http_get_gives_up_on_a_redirect_loop(site: Any) -> None:
    with pytest.raises(FetchFailed, match="more than 5 redirects"):
        HTTP_GET.run({"url": f"{site.base}/loop"}, LocalToolContext())


# --- crawl_site -----------------------------------------------------------------------------


def test_crawl_site_reports_every_page_of_the_host(site: Any) -> None:
    ctx = LocalToolContext()
    result = CRAWL_SITE.run({"url": f"{site.base}/"}, ctx)

    pages = {p["url"].removeprefix(site.base): p for p in ctx.partials}
    assert list(pages) == ["/", "/a", "/b", "/moved", "/evil", "/missing", "/offhost"]
    assert pages["/"] == {
        "url": f"{site.base}/",
        "status": 200,
        "title": "Home page",
        "words": 15,
        "links": 10,
    }
    assert pages["/moved"]["final_url"] == f"{site.base}/c"
    assert pages["/missing"]["status"] == 404
    assert pages["/offhost"]["redirected_to"] == "http://other.example/landing"
    assert result["pages"] == ctx.partials
    host = site.base.removeprefix("http://")
    assert result["summary"] == (
        f"crawled 7 pages on {host}: 6 ok, 1 failed ({site.base}/missing), 1 blocked by robots.txt"
    )


def test_crawl_site_respects_robots_txt(site: Any) -> None:
    result = CRAWL_SITE.run({"url": f"{site.base}/"}, LocalToolContext())

    assert result["blocked_by_robots"] == [f"{site.base}/private/x"]
    assert "/private/x" not in site.requested
    assert site.requested[0] == "/robots.txt"


def test_crawl_site_never_follows_a_redirect_off_the_host(site: Any) -> None:
    """Not to another site, and so not to an internal address either."""
    ctx = LocalToolContext()
    CRAWL_SITE.run({"url": f"{site.base}/"}, ctx)

    evil = next(p for p in ctx.partials if p["url"].endswith("/evil"))
    assert (evil["status"], evil["redirected_to"]) == (302, METADATA)
    assert evil["title"] == ""


def test_crawl_site_stops_at_max_pages_with_progress(site: Any) -> None:
    ctx = LocalToolContext()
    result = CRAWL_SITE.run({"url": site.base, "max_pages": 2}, ctx)

    assert [p["url"] for p in ctx.partials] == [f"{site.base}/", f"{site.base}/a"]
    assert result["pages_crawled"] == 2
    assert ctx.progress_updates[-1] == (1.0, f"2/2 {site.base}/a")


class CancelAfterFirstPage(LocalToolContext):
    def partial(self, item: Any) -> int:
        index = super().partial(item)
        self.cancel()
        return index


def test_crawl_site_stops_between_pages_when_cancelled(site: Any) -> None:
    ctx = CancelAfterFirstPage()

    with pytest.raises(ToolCancelled):
        CRAWL_SITE.run({"url": f"{site.base}/"}, ctx)

    assert len(ctx.partials) == 1
    assert site.requested == ["/robots.txt", "/"]


def test_crawl_site_refuses_an_internal_start_address() -> None:
    with pytest.raises(ValidationError, match="not a public address"):
        CRAWL_SITE.validate({"url": METADATA})


def test_crawl_site_checks_a_start_name_when_it_runs(settings: Any) -> None:
    settings.AGENTSITE_ALLOWED_PRIVATE_HOSTS = []
    args = CRAWL_SITE.validate({"url": "http://localhost:9/"})

    with pytest.raises(AddressRefused, match="not a public address"):
        CRAWL_SITE.run(args, LocalToolContext())
