"""``read_file`` and ``list_files``: read-only views of the workspace."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
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
# A listing is one walk of the tree, bounded three ways: the pattern may hold at
# most this many '**' segments, the walk stops with an error after visiting this
# many entries, and it looks at the tool's deadline every few hundred entries.
MAX_RECURSIVE_SEGMENTS = 2
MAX_ENTRIES_VISITED = 100_000
DEADLINE_CHECK_EVERY = 256
GLOB_MAGIC = re.compile(r"[*?\[]")


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
        recursive = sum(1 for segment in pattern_segments(value) if segment == "**")
        if recursive > MAX_RECURSIVE_SEGMENTS:
            raise ValueError(
                f"the pattern has {recursive} '**' segments; at most {MAX_RECURSIVE_SEGMENTS} "
                "are allowed (one '**' already matches any depth)"
            )
        return value


def pattern_segments(pattern: str) -> list[str]:
    return [segment for segment in pattern.split("/") if segment not in ("", ".")]


def segment_regex(segment: str) -> str:
    """One path segment of a glob as a regex: '*' and '?' never cross a '/'."""
    out, i = [], 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in segment[i + 2 :]:
            end = segment.index("]", i + 2)
            body = segment[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def glob_regex(segments: list[str]) -> re.Pattern[str]:
    """The whole glob as one regex over '/'-joined relative paths of files."""
    parts = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(".+" if last else "(?:[^/]+/)*")
        else:
            parts.append(segment_regex(segment) + ("" if last else "/"))
    return re.compile("".join(parts) or "[^/]+")


def hidden_name(name: str) -> bool:
    return name.startswith(".") or name in NOISE_DIRS


class Walk:
    """A depth-first walk in sorted order (the order of sorted paths), counted and
    stopped at the tool's deadline."""

    def __init__(self, ctx: ToolContext | None, *, include_hidden: bool) -> None:
        self.ctx = ctx
        self.include_hidden = include_hidden
        self.visited = 0

    def entries(self, directory: Path, relative: str) -> Iterator[tuple[os.DirEntry[str], str]]:
        try:
            with os.scandir(directory) as scan:
                children = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            return
        for entry in children:
            self.count()
            if not self.include_hidden and hidden_name(entry.name):
                continue
            path = f"{relative}{entry.name}"
            # Directory links are not followed: they may loop or leave the workspace.
            if entry.is_dir(follow_symlinks=False):
                yield from self.entries(Path(entry.path), f"{path}/")
            else:
                yield entry, path

    def count(self) -> None:
        self.visited += 1
        if self.visited > MAX_ENTRIES_VISITED:
            raise ValueError(
                f"list_files stopped after visiting {MAX_ENTRIES_VISITED} entries; "
                "narrow the path or the pattern"
            )
        if self.visited % DEADLINE_CHECK_EVERY == 0 and self.ctx is not None:
            if self.ctx.cancelled:
                raise TimeoutError(
                    f"list_files stopped at its deadline after visiting {self.visited} "
                    "entries; narrow the path or the pattern"
                )


def list_files(args: Any, ctx: ToolContext | None = None) -> dict[str, Any]:
    params = tool_input(ListFilesInput, args)
    base = workspace_path(params.path)
    root = workspace_root()
    segments = pattern_segments(params.pattern)
    # Leading literal segments name where the walk starts.
    prefix: list[str] = []
    while len(segments) > 1 and segments[0] != "**" and not GLOB_MAGIC.search(segments[0]):
        prefix.append(segments.pop(0))
    matches = glob_regex(segments)
    files: list[dict[str, Any]] = []
    truncated = False
    walk = Walk(ctx, include_hidden=params.include_hidden)
    # A hidden directory named outright in the pattern is still hidden.
    hidden_prefix = not params.include_hidden and any(hidden_name(part) for part in prefix)
    start = base.joinpath(*prefix).resolve()
    leaves = not start.is_relative_to(root)  # a directory link out of the workspace
    found = iter(()) if hidden_prefix or leaves else walk.entries(start, "")
    for entry, relative in found:
        if not matches.fullmatch(relative):
            continue
        candidate = Path(entry.path)
        # A symlink may point out of the workspace even when its own path is inside.
        resolved = candidate.resolve()
        if not resolved.is_file() or not resolved.is_relative_to(root):
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
