from __future__ import annotations

from channels.layers import get_channel_layer
from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # Import what running a job needs once, in the parent process: RQ forks a
        # work horse per job, and a horse that inherits it all starts at once.
        # Inside ready(): these modules use the models, which exist only now.
        from jobs import registry, runner, services, webhooks  # noqa: F401

        registry.load_builtin_tools()
        get_channel_layer()  # imports the layer's backend; connects only when used
