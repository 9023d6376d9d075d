from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    name = "agentsite"
    verbose_name = "agentsite"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from agentsite.compat import asyncio as compat_asyncio

        # Before any task is cancelled: a cancellation during a Redis command is kept.
        compat_asyncio.install()

        from agentsite.core.telemetry import on_connection_created
        from agentsite.ops import checks  # noqa: F401  (registers the system checks)

        # Counts the first database connection after a process lost its database.
        connection_created.connect(on_connection_created, dispatch_uid="agentsite-reconnects")
