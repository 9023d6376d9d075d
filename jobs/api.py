"""The job REST API (``/api/jobs``)."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["jobs"])
