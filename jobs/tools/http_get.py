"""``http_get``: fetch one URL, size- and time-capped, under the outgoing address rules."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobs.addresses import AddressRefused, check_url
from jobs.registry import ToolContext, tool
from jobs.tools.outgoing_http import FetchFailed, fetch_checked, http_client
from jobs.tools.running import tool_input

TEXT_TYPES = ("application/json", "application/xml", "application/javascript")
SHOWN_HEADERS = ("content-type", "content-length", "last-modified", "etag", "cache-control")


class HttpGetInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        max_length=2000,
        description=(
            "The http or https URL to fetch. Private, loopback and link-local addresses are "
            "refused, also when a redirect points there."
        ),
    )
    max_bytes: int = Field(
        default=100_000,
        ge=1,
        le=2_000_000,
        description="Read at most this many bytes of the body; the rest is cut off.",
    )
    timeout_s: float = Field(
        default=10.0, gt=0, le=30, description="Give up after this many seconds in total."
    )

    @field_validator("url")
    @classmethod
    def url_is_allowed(cls, value: str) -> str:
        try:
            return check_url(value)
        except AddressRefused as exc:
            raise ValueError(str(exc)) from exc


def is_text(content_type: str) -> bool:
    return (
        content_type.startswith("text/")
        or content_type in TEXT_TYPES
        or content_type.endswith(("+json", "+xml"))
    )


def http_get(args: Any, ctx: ToolContext | None = None) -> dict[str, Any]:
    params = tool_input(HttpGetInput, args)
    with http_client() as client:
        try:
            fetched = fetch_checked(
                client, params.url, max_bytes=params.max_bytes, timeout_s=params.timeout_s
            )
        except AddressRefused as exc:
            raise AddressRefused(f"refused {params.url}: {exc}") from exc
        except FetchFailed as exc:
            raise FetchFailed(f"GET {params.url} failed: {exc}") from exc
    text = fetched.text() if is_text(fetched.content_type) else None
    size = f"{len(fetched.body)} bytes" + (" (truncated)" if fetched.truncated else "")
    return {
        "summary": f"{fetched.status} {fetched.content_type or 'no content type'}, {size} "
        f"from {fetched.url}",
        "url": fetched.url,
        "status": fetched.status,
        "redirects": fetched.redirects,
        "headers": {k: fetched.headers[k] for k in SHOWN_HEADERS if k in fetched.headers},
        "content_type": fetched.content_type,
        "bytes": len(fetched.body),
        "truncated": fetched.truncated,
        "text": text,
    }


http_get_tool = tool(
    name="http_get",
    description=(
        "Fetch one web page or API response with GET and return its status, main headers and "
        "text (cut off at max_bytes). Follows up to 5 redirects. Only public addresses are "
        "reachable. For many pages of one site, start crawl_site instead."
    ),
    input_model=HttpGetInput,
    kind="blocking",
    approval="always",
    default_timeout_s=15.0,
    max_timeout_s=30.0,
)(http_get)
