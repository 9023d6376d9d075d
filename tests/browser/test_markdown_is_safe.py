"""Model and tool text render as markdown without ever becoming markup or script."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.models import AgentSession

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = (
    "# Title <script>window.pwned = 1</script>\n\n"
    "**bold** and `<b>code</b>` and [click](javascript:window.pwned=2) "
    '[ok](https://example.com/?a=1&b="x")\n\n'
    '<img src=x onerror="window.pwned=3">\n\n'
    "| a | b |\n|---|---|\n| <i>1</i> | 2 |\n\n"
    "```\n<script>window.pwned=4</script>\n```"
)


def test_the_renderer_escapes_everything_it_does_not_create(
    page: Any, site: str, user: Any
) -> None:
    session = AgentSession.objects.create(owner=user)
    page.goto(f"{site}/sessions/{session.id}/")
    html = page.evaluate("(s) => window.agentsiteMarkdown.render(s)", HOSTILE)
    page.evaluate(
        "(h) => { const d = document.createElement('div'); d.innerHTML = h;"
        " document.body.appendChild(d); }",
        html,
    )

    assert page.evaluate("window.pwned") is None
    assert "<script" not in html and "<img" not in html and "<i>" not in html
    assert 'href="javascript' not in html
    assert "<strong>bold</strong>" in html and "<table>" in html
    assert 'href="https://example.com/?a=1&amp;b=&quot;x&quot;"' in html
    assert "&lt;script&gt;" in html
