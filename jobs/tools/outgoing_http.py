"""GET requests that obey the outgoing address rules at every hop.

httpx is never allowed to follow redirects by itself: each Location is checked
with ``jobs.addresses.checked_addresses`` before it is requested, so a public page
cannot bounce a request onto a private or loopback address.

The connection goes to the address that was checked, not to whatever a second
DNS lookup returns: otherwise a name that resolves to a public address for the
check and to 127.0.0.1 a moment later (DNS rebinding) would get through. The
request names the checked IP; the Host header and TLS SNI keep the hostname.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass, field
from email.message import Message
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from jobs.addresses import checked_addresses

USER_AGENT = "agentsite/0.1 (+https://github.com/agentsite)"
MAX_REDIRECTS = 5


class FetchFailed(Exception):
    """The request could not be completed (refused address, network error, too slow)."""


@dataclass
class Fetched:
    url: str
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)
    # Set when a redirect was not followed because it leaves ``same_host``.
    redirect_not_followed: str = ""

    @property
    def content_type(self) -> str:
        return str(self.headers.get("content-type", "")).split(";", 1)[0].strip().lower()

    def text(self) -> str:
        message = Message()
        message["content-type"] = self.headers.get("content-type", "")
        charset = message.get_content_charset() or "utf-8"
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


def http_client() -> httpx.Client:
    # trust_env=False: a proxy from the environment would resolve names itself,
    # making the address check meaningless. No keep-alive: a pooled connection
    # to one IP must not carry a request meant for another hostname's TLS session.
    return httpx.Client(
        headers={"User-Agent": USER_AGENT},
        trust_env=False,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def pinned_request(url: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Check ``url`` and return (URL to request, extra headers, request extensions).

    The name is resolved once, by the check; the URL returned names the checked
    address, so the client has nothing left to resolve.
    """
    addresses = checked_addresses(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not addresses or is_ip_literal(host):
        return url, {}, {}
    address = addresses[0].split("%", 1)[0]
    literal = f"[{address}]" if ":" in address else address
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    pinned = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    host_header = f"{host}:{parts.port}" if parts.port else host
    return pinned, {"Host": host_header}, {"sni_hostname": host}


def is_redirect(response: httpx.Response) -> bool:
    return response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers


def fetch_checked(
    client: httpx.Client,
    url: str,
    *,
    max_bytes: int,
    timeout_s: float,
    same_host: str | None = None,
) -> Fetched:
    """GET ``url``; raises AddressRefused for a refused hop and FetchFailed otherwise."""
    started = time.monotonic()
    redirects: list[str] = []
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        target_url, headers, extensions = pinned_request(current)
        left = timeout_s - (time.monotonic() - started)
        if left <= 0:
            raise FetchFailed(f"no complete response within {timeout_s:g} s")
        try:
            with client.stream(
                "GET",
                target_url,
                headers=headers,
                extensions=extensions,
                timeout=left,
                follow_redirects=False,
            ) as response:
                if is_redirect(response):
                    target = urljoin(current, response.headers["location"]).split("#", 1)[0]
                    redirects.append(target)
                    if same_host is not None and urlsplit(target).netloc.lower() != same_host:
                        return Fetched(
                            url=current,
                            status=response.status_code,
                            headers=response.headers,
                            body=b"",
                            truncated=False,
                            redirects=redirects,
                            redirect_not_followed=target,
                        )
                    current = target
                    continue
                body, truncated = read_capped(response, max_bytes, started + timeout_s)
                return Fetched(
                    current, response.status_code, response.headers, body, truncated, redirects
                )
        except httpx.HTTPError as exc:
            raise FetchFailed(f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc)) from exc
    raise FetchFailed(f"more than {MAX_REDIRECTS} redirects")


def read_capped(response: httpx.Response, max_bytes: int, give_up_at: float) -> tuple[bytes, bool]:
    """Read at most ``max_bytes`` of the body, and no longer than until ``give_up_at``."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[:max_bytes], True
        if time.monotonic() > give_up_at:
            raise FetchFailed("the response body took too long")
    return b"".join(chunks), False
