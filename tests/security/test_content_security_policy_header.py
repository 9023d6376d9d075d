"""Every page carries a strict Content-Security-Policy; static files are never sniffed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from sessions.models import AgentSession

pytestmark = pytest.mark.django_db


def directives(policy: str) -> dict[str, list[str]]:
    parts = (part.split() for part in policy.split(";") if part.strip())
    return {name: values for name, *values in parts}


def test_the_pages_forbid_inline_scripts_plugins_base_changes_and_framing(user: Any) -> None:
    client = Client()
    client.force_login(user)
    session = AgentSession.objects.create(owner=user)

    for path in ("/login/", "/", f"/sessions/{session.id}/", "/api/docs"):
        response = client.get(path)
        assert response.status_code == 200, path
        policy = directives(response["Content-Security-Policy"])
        assert policy["default-src"] == ["'self'"], path
        assert policy["script-src"] == ["'self'"], path
        assert policy["object-src"] == ["'none'"], path
        assert policy["base-uri"] == ["'none'"], path
        assert policy["frame-ancestors"] == ["'none'"], path
        assert policy["connect-src"] == ["'self'"], path  # the same origin's ws:/wss: too


# What the policy refuses in a page: an inline script (a <script> without src), a
# <style> element, a style attribute, an on… event handler attribute.
INLINE = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=", re.IGNORECASE)


def test_no_template_carries_an_inline_script_style_or_event_handler() -> None:
    templates = list(Path(settings.BASE_DIR, "templates").rglob("*.html"))

    assert templates
    for template in templates:
        assert INLINE.findall(template.read_text()) == [], template
