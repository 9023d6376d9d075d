"""``read_file`` and ``list_files``: read-only views of the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobs.registry import ToolContext, tool
from jobs.tools.running import tool_input
from jobs.tools.workspace_paths import (
    WorkspacePathError,
    workspace_path,
    workspace_relative,
    workspace_root,
)

BINARY_SNIFF_BYTES = 8192
NOISE_DIRS = {"__pycache__", "node_modules"}


class ReadFileInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        max_length=500,
        description="The file to read, relative to the workspace root, e.g. 'tests/test_x.py'.",
    )
    max_bytes: int = Field(
        default=64_000,
        ge=1,
        le=1_000_000,
        description="Return at most this many bytes; longer files are cut off and flagged.",
    )

    @field_validator("path")
    @classmethod
    def path_is_a_workspace_file(cls, value: str) -> str:
        if not workspace_path(value).is_file():
            raise WorkspacePathError(f"{value!r} is not a file")
        return value


def read_file(args: Any, ctx: ToolContext | None = None) -> dict[str, Any]:
    params = tool_input(ReadFileInput, args)
    path = workspace_path(params.path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        raw = handle.read(params.max_bytes + 1)
    if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
        raise ValueError(f"{params.path!r} is a binary file; read_file returns text only")
    truncated = len(raw) > params.max_bytes
    text = raw[: params.max_bytes].decode("utf-8", errors="replace")
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    shown = f"first {params.max_bytes} of {size} bytes" if truncated else f"{size} bytes"
    return {
        "summary": f"{workspace_relative(path)}: {lines} line{'' if lines == 1 else 's'}, {shown}",
        "path": workspace_relative(path),
        "size": size,
        "lines": lines,
        "truncated": truncated,
        "text": text,
    }


class ListFilesInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        default=".",
        max_length=500,
        description="The directory to list, relative to the workspace root.",
    )
    pattern: str = Field(
        default="**/*",
        max_length=200,
        description="A glob relative to that directory: '*.py', 'tests/**/*.py', '**/*'.",
    )
    max_results: int = Field(
        default=200, ge=1, le=2000, description="Return at most this many files."
    )
    include_hidden: bool = Field(
        default=False,
        description="Also list dot-files, dot-directories and __pycache__ contents.",
    )

    @field_validator("path")
    @classmethod
    def path_is_a_workspace_directory(cls, value: str) -> str:
        if not workspace_path(value).is_dir():
            raise WorkspacePathError(f"{value!r} is not a directory")
        return value

    @field_validator("pattern")
    @classmethod
    def pattern_stays_below_path(cls, value: str) -> str:
        if value.startswith("/") or ".." in Path(value).parts:
            raise ValueError("the pattern must be relative and may not contain '..'")
        return value


def is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") or part in NOISE_DIRS for part in relative.parts)


def list_files(args: Any, ctx: ToolContext | None = None) -> dict[str, Any]:
    params = tool_input(ListFilesInput, args)
    base = workspace_path(params.path)
    root = workspace_root()
    files: list[dict[str, Any]] = []
    truncated = False
    for candidate in sorted(base.glob(params.pattern)):
        # A symlink may point out of the workspace even when its own path is inside.
        resolved = candidate.resolve()
        if not resolved.is_file() or not resolved.is_relative_to(root):
            continue
        relative = candidate.relative_to(base)
        if not params.include_hidden and is_hidden(relative):
            continue
        if len(files) == params.max_results:
            truncated = True
            break
        files.append({"path": workspace_relative(candidate), "size": resolved.stat().st_size})
    where = workspace_relative(base)
    more = f" (first {len(files)}; more exist)" if truncated else ""
    return {
        "summary": f"{len(files)} files matching {params.pattern!r} in {where}{more}",
        "path": where,
        "pattern": params.pattern,
        "files": files,
        "truncated": truncated,
    }


read_file_tool = tool(
    name="read_file",
    description=(
        "Read a text file of the workspace (the project the tests run in). Returns the text, "
        "cut off at max_bytes. Use list_files first to find paths."
    ),
    input_model=ReadFileInput,
    kind="blocking",
    default_timeout_s=10.0,
    max_timeout_s=30.0,
)(read_file)

list_files_tool = tool(
    name="list_files",
    description=(
        "List the files of the workspace, or of one directory of it, matching a glob "
        "pattern. Returns paths relative to the workspace root with their sizes."
    ),
    input_model=ListFilesInput,
    kind="blocking",
    default_timeout_s=10.0,
    max_timeout_s=30.0,
)(list_files)
