"""Opaque, prefixed identifiers: ``job_…``, ``ses_…``, ``run_…``."""

from __future__ import annotations

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
