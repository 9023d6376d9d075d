"""A pytest plugin for the A2A compatibility kit's run: every HTTP request it makes
carries the agentsite API token of ``A2A_TCK_BEARER`` (the kit's 1.0 clients send no
credentials of their own, and agentsite serves A2A to authenticated callers only)."""

from __future__ import annotations

import os
from typing import Any

import httpx

TOKEN = os.environ["A2A_TCK_BEARER"]


def _with_bearer(init: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        headers = httpx.Headers(kwargs.pop("headers", None))
        headers.setdefault("Authorization", f"Bearer {TOKEN}")
        init(self, *args, headers=headers, **kwargs)

    return __init__


httpx.Client.__init__ = _with_bearer(httpx.Client.__init__)  # type: ignore[method-assign]
httpx.AsyncClient.__init__ = _with_bearer(httpx.AsyncClient.__init__)  # type: ignore[method-assign]
