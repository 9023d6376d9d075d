from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import ApiToken


class Command(BaseCommand):
    help = "Revoke (delete) API tokens: by PREFIX (the first 12 characters), or all of --user."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", nargs="?", help="The token's prefix, e.g. ast_AbCdEfGh.")
        parser.add_argument("--user", help="Revoke every token of this username.")

    def handle(self, *args: Any, **options: Any) -> None:
        prefix, username = options["prefix"], options["user"]
        if bool(prefix) == bool(username):
            raise CommandError("Give a token prefix or --user USERNAME (one of them).")
        tokens = ApiToken.objects.all()
        if prefix:
            tokens = tokens.filter(prefix=prefix)
        else:
            tokens = tokens.filter(user__username=username)
        deleted, _ = tokens.delete()
        if not deleted:
            raise CommandError("No such token.")
        self.stdout.write(f"Revoked {deleted} token{'s' if deleted != 1 else ''}.")
