from __future__ import annotations

from django.apps import AppConfig

from jobs.hooks import hooks_register


class SessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" belongs to django.contrib.sessions, which the admin needs.
    label = "agent_sessions"
    verbose_name = "Agent sessions"

    def ready(self) -> None:
        # Inside ready(): these modules use the models, which exist only now.
        from sessions import job_hooks

        # jobs never imports sessions: a job reaches its session through these.
        hooks_register(
            session_event=job_hooks.job_event_record,
            session_is_live=job_hooks.session_is_live,
            session_model=job_hooks.session_text_model,
        )
