from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    name = "agentsite"
    verbose_name = "agentsite"

    def ready(self) -> None:
        from agentsite import checks  # noqa: F401  (registers the system checks)
