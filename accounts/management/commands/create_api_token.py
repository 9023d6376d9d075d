from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import ApiToken


class Command(BaseCommand):
    help = (
        "Print a new API token for USERNAME, by default the login `make run` creates "
        "(AGENTSITE_ADMIN_USER, else admin); only its hash is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "username", nargs="?", default=None, help="Whose token (default: the admin login)."
        )
        parser.add_argument("--name", default="", help="A label to recognise the token by.")
        parser.add_argument(
            "--expires-in-days", type=int, default=None, help="Valid for this many days."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        username = options["username"] or os.environ.get("AGENTSITE_ADMIN_USER", "admin")
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist as exc:
            raise CommandError(f"No user named {username!r}.") from exc
        days = options["expires_in_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-in-days must be at least 1.")
        expires_in = timedelta(days=days) if days is not None else None
        _, raw = ApiToken.issue(user=user, name=options["name"], expires_in=expires_in)
        self.stdout.write(raw)
