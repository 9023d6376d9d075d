from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from accounts.credentials import connect_signals

        # Revocations, deactivations and logouts end the live connections they concern.
        connect_signals()
