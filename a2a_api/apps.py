from django.apps import AppConfig


class A2AConfig(AppConfig):
    name = "a2a_api"
    label = "a2a_api"
    verbose_name = "A2A"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Tasks with push notifications hear of the log's moves (sessions never imports A2A).
        from a2a_api.push import watch
        from sessions.log_watch import log_watch

        log_watch(watch)
