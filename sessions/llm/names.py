"""The model names a session or ``AGENTSITE_MODEL`` may give: defined here, once.

The API's validation, the system check and the choice of client all read them.
"""

from __future__ import annotations

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
