"""System checks for configuration mistakes, each with an id."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from sessions.llm.names import CLAUDE_PREFIX, LOCAL_MODELS


@register("agentsite")
def check_environment(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    messages: list[CheckMessage] = [
        Error(message, hint=f"Fix or unset {name}.", id="agentsite.E001")
        for name, message in getattr(settings, "CONFIG_ERRORS", [])
    ]
    messages += check_model() + check_workspace() + check_turn_pools() + check_quotas()
    messages += check_redis() + check_database_hosts()
    if not settings.DEBUG and settings.SECRET_KEY and len(settings.SECRET_KEY) < 32:
        messages.append(
            Warning("SECRET_KEY is short for a production deployment.", id="agentsite.W001")
        )
    return messages


def check_model() -> list[CheckMessage]:
    model = settings.AGENTSITE_MODEL
    if model in LOCAL_MODELS:
        return []
    if not model.startswith(CLAUDE_PREFIX):
        return [
            Error(
                f"AGENTSITE_MODEL={model!r} is neither 'offline' nor an Anthropic model name.",
                hint="Use 'offline', or a model name such as 'claude-sonnet-4-5'.",
                id="agentsite.E002",
            )
        ]
    if not settings.ANTHROPIC_API_KEY:
        return [
            Error(
                f"AGENTSITE_MODEL={model!r} needs ANTHROPIC_API_KEY.",
                hint="Set ANTHROPIC_API_KEY, or use AGENTSITE_MODEL=offline.",
                id="agentsite.E003",
            )
        ]
    return []


def check_workspace() -> list[CheckMessage]:
    workspace = settings.AGENTSITE_WORKSPACE
    if not workspace.is_dir():
        return [
            Error(
                f"AGENTSITE_WORKSPACE={str(workspace)!r} is not a directory.",
                hint="Point it at the folder that tools may read and run tests in.",
                id="agentsite.E004",
            )
        ]
    return []


def check_turn_pools() -> list[CheckMessage]:
    names = (
        "AGENTSITE_TURN_CONCURRENCY",
        "AGENTSITE_TURN_DB_THREADS",
        "AGENTSITE_TURN_TOOL_THREADS",
        "AGENTSITE_BLOCKING_TOOL_THREADS",
        "AGENTSITE_DELTA_WRITES_PER_S",
    )
    return [
        Error(
            f"{name}={getattr(settings, name)!r} must be at least 1.",
            hint=f"Set {name} to a positive number, or unset it for the default.",
            id="agentsite.E005",
        )
        for name in names
        if getattr(settings, name) < 1
    ]


def check_quotas() -> list[CheckMessage]:
    limits = (
        "AGENTSITE_QUOTA_LIVE_JOBS",
        "AGENTSITE_QUOTA_LIVE_TURNS",
        "AGENTSITE_QUOTA_MESSAGES_PER_MINUTE",
        "AGENTSITE_QUOTA_MCP_SESSIONS",
    )
    messages: list[CheckMessage] = [
        Error(
            f"{name}={getattr(settings, name)!r} must be 0 (no limit) or more.",
            hint=f"Set {name} to a limit, or unset it for the default.",
            id="agentsite.E006",
        )
        for name in limits
        if getattr(settings, name) < 0
    ]
    positive = ("AGENTSITE_QUOTA_MCP_IDLE_S", "AGENTSITE_MCP_MAX_SESSIONS")
    messages += [
        Error(
            f"{name}={getattr(settings, name)!r} must be above 0.",
            hint=f"Set {name} to a positive number, or unset it for the default.",
            id="agentsite.E006",
        )
        for name in positive
        if not getattr(settings, name) > 0
    ]
    return messages


def check_redis() -> list[CheckMessage]:
    """Redis is one server by REDIS_URL or a primary found through sentinels, never half of each."""
    sentinel_only = {
        "REDIS_SENTINEL_MASTER": settings.REDIS_SENTINEL_MASTER,
        "REDIS_SENTINEL_PASSWORD": settings.REDIS_SENTINEL_PASSWORD,
        "REDIS_PASSWORD": settings.REDIS_PASSWORD,
        "REDIS_DB": settings.REDIS_DB,
    }
    if not settings.REDIS_SENTINELS:
        return [
            Error(
                f"{name} is set but REDIS_SENTINELS is not: it applies only through Sentinel.",
                hint="Set REDIS_SENTINELS, or unset it (with REDIS_URL, the URL says it all).",
                id="agentsite.E007",
            )
            for name, value in sentinel_only.items()
            if value
        ]
    messages: list[CheckMessage] = []
    if not settings.REDIS_SENTINEL_MASTER:
        messages.append(
            Error(
                "REDIS_SENTINELS is set but REDIS_SENTINEL_MASTER is not.",
                hint="Set REDIS_SENTINEL_MASTER to the name the sentinels monitor the primary by.",
                id="agentsite.E007",
            )
        )
    if settings.REDIS_URL:
        messages.append(
            Error(
                "REDIS_URL and REDIS_SENTINELS are both set: Redis would be found two ways.",
                hint="Unset REDIS_URL; the data password and database are REDIS_PASSWORD and "
                "REDIS_DB.",
                id="agentsite.E007",
            )
        )
    return messages


def check_database_hosts() -> list[CheckMessage]:
    """Several PostgreSQL hosts without ``target_session_attrs``: a standby may answer first."""
    database = settings.DATABASES["default"]
    options = database.get("OPTIONS") or {}
    if "," not in str(database.get("HOST") or "") or options.get("target_session_attrs"):
        return []
    return [
        Warning(
            "DATABASE_URL lists several hosts without target_session_attrs: a connection may "
            "reach a read-only standby, and every write on it fails.",
            hint="Add ?target_session_attrs=read-write to DATABASE_URL.",
            id="agentsite.W002",
        )
    ]
