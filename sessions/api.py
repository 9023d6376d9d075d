"""The sessions REST API (``/api/sessions``, ``/api/runs``)."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["sessions"])
