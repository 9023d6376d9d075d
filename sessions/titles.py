"""A session's title: the automatic one from its first message, and what a user may set.

The automatic title is the first ``AUTO_TITLE_WORDS`` words of the session's
first message (the first with words in it), whitespace collapsed, at most
``AUTO_TITLE_CHARS`` characters cut at a word boundary. It is the same rule for
every model, and no model is asked. It is only ever written over an empty
title (a compare-and-set on ``title=""``), so a title the user set, at
creation or by renaming, is never replaced by it.
"""

from __future__ import annotations

import unicodedata

from agentsite.core.errors import Invalid
from sessions.models import AgentSession

AUTO_TITLE_WORDS = 6
AUTO_TITLE_CHARS = 60
TITLE_MAX_CHARS = 200


def title_from_text(text: str) -> str:
    """The automatic title of a first message: a few words, whitespace collapsed."""
    printable = "".join(" " if is_control(c) else c for c in text)
    words = printable.split()[:AUTO_TITLE_WORDS]
    title = ""
    for word in words:
        longer = f"{title} {word}" if title else word
        if len(longer) > AUTO_TITLE_CHARS:
            # One long first word is cut where it must be; otherwise at the last whole word.
            return title or word[:AUTO_TITLE_CHARS]
        title = longer
    return title


def is_control(char: str) -> bool:
    """Control characters (NUL, tabs, line breaks, DEL…) and the line and paragraph separators."""
    return unicodedata.category(char) in ("Cc", "Zl", "Zp")


def session_title_auto(*, session_id: str, text: str) -> None:
    """Title an untitled session from the message ``text``; a set title is kept.

    Called for each message while the session has no title, so the title comes
    from its first message with words in it (one may carry only a client's tool
    results). One statement, and none once the session has a title.
    """
    title = title_from_text(text)
    if title:
        AgentSession.objects.filter(pk=session_id, title="").update(title=title)


def title_check(title: str) -> str:
    """The title a user asked for, trimmed; Invalid (``invalid_title``) when it cannot be one."""
    if not isinstance(title, str):
        raise Invalid("invalid_title", "The title must be text.")
    title = title.strip()
    if not title:
        raise Invalid("invalid_title", "The title is empty.")
    if len(title) > TITLE_MAX_CHARS:
        raise Invalid(
            "invalid_title",
            f"The title is longer than {TITLE_MAX_CHARS} characters.",
            {"max_length": TITLE_MAX_CHARS},
        )
    if any(is_control(c) for c in title):
        raise Invalid(
            "invalid_title",
            "The title may not contain control characters (line breaks, tabs, NUL).",
        )
    return title
