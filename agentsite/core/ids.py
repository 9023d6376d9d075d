"""Opaque, prefixed identifiers: ``job_…``, ``ses_…``, ``run_…``."""

from __future__ import annotations

import re
import secrets
import string

_ALPHABET = string.ascii_lowercase + string.digits


def new_id(prefix: str, length: int = 16) -> str:
    return f"{prefix}_" + "".join(secrets.choice(_ALPHABET) for _ in range(length))


def new_job_id() -> str:
    return new_id("job")


def new_session_id() -> str:
    return new_id("ses")


def new_run_id() -> str:
    return new_id("run")


def id_pattern(prefix: str) -> str:
    """What every id with ``prefix`` looks like (a regular expression)."""
    return rf"^{prefix}_[a-z0-9]{{1,36}}$"


def is_id(prefix: str, value: object) -> bool:
    """True when ``value`` could be an id with ``prefix``; anything else names nothing."""
    return isinstance(value, str) and re.fullmatch(id_pattern(prefix), value) is not None
