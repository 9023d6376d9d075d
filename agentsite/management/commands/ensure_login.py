"""Make sure a login exists, and say which.

Reads AGENTSITE_ADMIN_USER / AGENTSITE_ADMIN_PASSWORD when set (and never prints
a password that came from the environment); otherwise
creates ``admin`` with a random password the first time, prints it that once,
and keeps it in a git-ignored file only its owner can read; later runs name
the file instead of printing the password into every log of every start.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from agentsite.core.private_files import private_dir, private_file_create


class Command(BaseCommand):
    help = "Create the first login (superuser) if none exists and print its credentials."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        username = os.environ.get("AGENTSITE_ADMIN_USER", "admin")
        password = os.environ.get("AGENTSITE_ADMIN_PASSWORD")
        saved = settings.LOCAL_DIR / "login.txt"
        user = User.objects.filter(username=username).first()
        if user is None:
            password = password or secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, email="", password=password)
            if "AGENTSITE_ADMIN_PASSWORD" in os.environ:  # its owner knows it; logs need not
                self.stdout.write(
                    f"login created: username {username!r} (password from AGENTSITE_ADMIN_PASSWORD)"
                )
                return
            private_dir(settings.LOCAL_DIR)
            saved.unlink(missing_ok=True)  # a file left from an earlier database
            private_file_create(saved, f"{username}\n{password}\n")
            self.stdout.write(f"login created: username {username!r}, password {password!r}")
            return
        if password:
            user.set_password(password)
            user.save(update_fields=["password"])
            self.stdout.write(
                f"login: username {username!r} (password from AGENTSITE_ADMIN_PASSWORD)"
            )
        elif saved.exists():
            self.stdout.write(f"login: username {username!r}, password in {saved}")
        else:
            self.stdout.write(f"login: username {username!r} (password unchanged)")
