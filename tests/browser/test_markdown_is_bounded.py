"""The chat's markdown renderer does work in proportion to its input, whatever the input.

A model or a tool's output is untrusted text: no input may stall the page's
only thread (patterns that backtrack quadratically) or overflow its stack
(nesting without a bound), and a streamed reply must not be rendered again in
full on every delta.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.markdown_page import render_within, renderer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

__all__ = ["renderer"]

# Inputs that make a backtracking or recursive renderer stall or overflow: the
# hand-written one took about a minute on 200,000 link openers and overflowed its
# stack on a deep quote. A linear renderer returns from each in well under a
# second, so the 30 s it is given is ample.
ADVERSARIAL = {
    "unclosed link openers": "[a](" * 200_000,
    "unclosed links with text": "[a](x" * 100_000,
    "unbalanced brackets": "[" * 100_000 + "]" * 100_000,
    "emphasis markers": "*a **b _c " * 50_000,
    "code span ticks": "`a``" * 100_000,
    "one deep quote": ">" * 200_000 + " deep",
    "a staircase of quotes": "\n".join(">" * i + " x" for i in range(2_000)),
    "a staircase of lists": "\n".join("  " * i + "- x" for i in range(2_000)),
}


@pytest.mark.parametrize("source", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_input_renders_without_stalling_the_page(renderer: Any, source: str) -> None:
    html = render_within(renderer, source)

    assert html
    assert renderer.evaluate("1 + 1") == 2  # the page answers again


def test_text_nested_past_the_limit_is_shown_not_dropped(renderer: Any) -> None:
    limit = renderer.evaluate("window.agentsiteMarkdown.MAX_NESTING")
    html = render_within(renderer, ">" * 10_000 + " the bottom *line*")

    assert "the bottom <em>line</em>" in html
    assert html.count("<blockquote>") < limit


STREAMED = "".join(
    f"## Part {i}\n\nParagraph {i} with **bold**, `code` and [a link](https://example.com/{i}).\n\n"
    f"- item {i}.1\n- item {i}.2\n\n```\ncode {i}\n```\n\n| a | b |\n|---|---|\n| {i} | x |\n\n"
    for i in range(60)
)


def stream(renderer: Any, text: str, delta: int) -> dict[str, Any]:
    return dict(
        renderer.evaluate(
            """([text, delta]) => {
                const out = document.getElementById('out');
                const view = window.agentsiteMarkdown.stream(out);
                view.update(text.slice(0, 300));
                const first = out.firstElementChild;
                for (let end = 300 + delta; end < text.length + delta; end += delta) {
                    view.update(text.slice(0, end));
                }
                const tail = out.querySelector('.md-tail');
                const html = out.innerHTML.replace(tail.outerHTML, tail.innerHTML);
                return {
                    counts: view.counts,
                    firstKept: out.firstElementChild === first,
                    html,
                    whole: window.agentsiteMarkdown.render(text),
                };
            }""",
            [text, delta],
        )
    )


def test_a_streamed_reply_renders_each_finished_block_once(renderer: Any) -> None:
    result = stream(renderer, STREAMED, delta=20)

    assert result["firstKept"]  # the first heading's element was never rebuilt
    assert result["counts"]["committed"] == 5 * 60 - 1  # all but the open last block
    # Re-rendering the whole bubble per delta would parse about deltas * length / 2
    # characters (here ~200 times the text); the open tail alone, a few times the text.
    assert result["counts"]["parsedChars"] < 6 * len(STREAMED)
    assert result["html"] == result["whole"]  # the same page as one render of the whole


def test_a_reply_that_is_not_an_extension_is_rendered_afresh(renderer: Any) -> None:
    html = renderer.evaluate(
        """() => {
            const out = document.getElementById('out');
            const view = window.agentsiteMarkdown.stream(out);
            view.update('# One\\n\\nfirst\\n\\nsecond');
            view.update('# Two\\n\\nother');
            return out.innerHTML;
        }"""
    )

    assert "One" not in html and "Two" in html and "first" not in html
