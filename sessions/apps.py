from __future__ import annotations

from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" belongs to django.contrib.sessions, which the admin needs.
    label = "agent_sessions"
    verbose_name = "Agent sessions"
