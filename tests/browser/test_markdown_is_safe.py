"""Model and tool text render as markdown without ever becoming markup or script."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.models import AgentSession
from tests.browser.markdown_page import render_within, renderer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

__all__ = ["renderer"]

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


# Emphasis markers inside a URL or around a link are text or markup of their own;
# they never open a tag inside the generated <a> or split its attributes.
LINKS = {
    "[a](https://example.com/*x*_y_)": (
        '<a href="https://example.com/*x*_y_" rel="noopener noreferrer nofollow"'
        ' target="_blank">a</a>'
    ),
    "[**bold** label](https://example.com/)": "<strong>bold</strong> label</a>",
    "*[a](https://example.com/)*": "<em><a href=",
    '[x](https://example.com/"onmouseover="alert(1))': 'href="https://example.com/&quot;',
    "**[a](https://e.com/**)": 'href="https://e.com/**"',
    "[a](javascript:alert(1)) [b](data:text/html,x) [c](vbscript:x)": "[a](javascript:alert(1))",
    "![img](https://example.com/pixel.png)": "pixel.png",
    "<a href=https://e.com onclick=x>y</a>": "&lt;a href=https://e.com onclick=x&gt;y&lt;/a&gt;",
}


@pytest.mark.parametrize(("source", "expected"), LINKS.items(), ids=list(LINKS))
def test_emphasis_stays_outside_the_links_markup(renderer: Any, source: str, expected: str) -> None:
    html = render_within(renderer, source)
    renderer.evaluate("(h) => { document.getElementById('out').innerHTML = h; }", html)

    assert expected in html
    assert "<img" not in html and "javascript:" not in html.replace("[a](javascript:", "")
    links = renderer.evaluate(
        "() => [...document.querySelectorAll('#out a')].map((a) => a.getAttributeNames())"
    )
    assert all(names == ["href", "rel", "target"] for names in links)
    inside_links = "document.querySelectorAll('#out a *:not(strong):not(em)').length"
    assert renderer.evaluate(inside_links) == 0
