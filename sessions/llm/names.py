"""The model names a session or ``AGENTSITE_MODEL`` may give: defined here, once.

The API's validation, the system check and the choice of client all read them.
Which of them this deployment offers is ``AGENTSITE_ALLOWED_MODELS``
(``model_is_allowed``); the scripted model, which keeps what it is sent, exists
only where ``AGENTSITE_SCRIPTED_MODEL`` turns it on (the test suite).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from django.conf import settings

OFFLINE = "offline"
SCRIPTED = "scripted"
# The default Anthropic model (``claude.DEFAULT_MODEL`` unless AGENTSITE_MODEL names one).
ANTHROPIC = "anthropic"
CLAUDE_PREFIX = "claude"

# The models that need no network and no key.
LOCAL_MODELS = (OFFLINE, SCRIPTED)
# Every name a session may give, as a regular expression (an empty name means the default).
MODEL_NAME_PATTERN = rf"{OFFLINE}|{SCRIPTED}|{ANTHROPIC}|{CLAUDE_PREFIX}[\s\S]*"
MODEL_NAMES_TEXT = f"{OFFLINE}, {SCRIPTED} or a {CLAUDE_PREFIX}-* model name"


def is_anthropic(name: str) -> bool:
    return name.startswith(CLAUDE_PREFIX) or name == ANTHROPIC


def scripted_enabled() -> bool:
    return bool(settings.AGENTSITE_SCRIPTED_MODEL)


def models_allowed() -> list[str]:
    """The names (or fnmatch patterns) a session may name, besides the empty default."""
    allowed = [name for name in settings.AGENTSITE_ALLOWED_MODELS if name != SCRIPTED]
    return [*allowed, SCRIPTED] if scripted_enabled() else allowed


def model_is_allowed(name: str) -> bool:
    """True for the default (empty) name and for names ``AGENTSITE_ALLOWED_MODELS`` offers."""
    if name == SCRIPTED:
        return scripted_enabled()
    return name == "" or any(fnmatchcase(name, allowed) for allowed in models_allowed())
