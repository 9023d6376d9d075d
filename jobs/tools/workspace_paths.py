"""Paths the file and test tools may touch: inside ``AGENTSITE_WORKSPACE`` only.

Every path is resolved (``..`` collapsed, symlinks followed) before the check,
so neither ``../secrets`` nor a symlink pointing out of the workspace gets through.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings


class WorkspacePathError(ValueError):
    """The path is outside the workspace, or does not exist there."""


def workspace_root() -> Path:
    return Path(settings.AGENTSITE_WORKSPACE).resolve()


def workspace_path(raw: str, *, must_exist: bool = True) -> Path:
    """Resolve ``raw`` (relative to the workspace) and refuse anything outside it."""
    root = workspace_root()
    if "\x00" in raw:
        raise WorkspacePathError("the path contains a NUL byte")
    resolved = (root / raw).resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise WorkspacePathError(f"{raw!r} is outside the workspace")
    if must_exist and not resolved.exists():
        raise WorkspacePathError(f"{raw!r} does not exist in the workspace")
    return resolved


def workspace_relative(path: Path) -> str:
    """The path as shown to models: relative to the workspace, with forward slashes."""
    relative = path.relative_to(workspace_root()).as_posix()
    return relative or "."


def server_paths_hidden(text: str) -> str:
    """``text`` (an error, a traceback) without the server's own absolute paths: workspace
    paths become relative, the install, its data and its Python become ``<server>``."""
    root = str(workspace_root())
    text = text.replace(root + "/", "").replace(root, ".")
    servers = {
        str(settings.LOCAL_DIR),
        str(settings.BASE_DIR),
        sys.prefix,
        sys.base_prefix,
        str(Path(sys.executable).resolve().parent.parent),
    }
    for path in sorted(servers, key=len, reverse=True):
        if len(path) > 1:
            text = text.replace(path, "<server>")
    return text


def tool_error_message(exc: BaseException) -> str:
    """What a failed tool call says: the error, without the server's own paths."""
    return server_paths_hidden(f"{type(exc).__name__}: {exc}")
