"""Every model of the project has names that read as English in the admin."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.db.migrations.state import ModelState
from django.db.models import Model
from django.test import Client
from django.utils.text import capfirst

pytestmark = pytest.mark.django_db

PROJECT_APPS = ("accounts", "jobs", "agent_sessions", "responses")
# Words whose plural is not a plain "s" (a consonant then "y", a hissing end).
NEEDS_ES_OR_IES = re.compile(r"(?:[^aeiou]y|s|x|z|ch|sh)$")


def project_models() -> list[type[Model]]:
    return [m for label in PROJECT_APPS for m in apps.get_app_config(label).get_models()]


def naive_plural(singular: str, plural: str) -> bool:
    """``plural`` is ``singular`` + "s" where English wants "-es" or "-ies"."""
    return plural == f"{singular}s" and bool(NEEDS_ES_OR_IES.search(singular))


def test_the_naive_plural_rule_is_recognised() -> None:
    assert naive_plural("webhook delivery", "webhook deliverys")
    assert naive_plural("address", "addresss")
    assert not naive_plural("webhook delivery", "webhook deliveries")
    assert not naive_plural("job", "jobs") and not naive_plural("key", "keys")


@pytest.mark.parametrize("model", project_models(), ids=lambda m: m._meta.label)
def test_each_model_has_a_proper_singular_and_plural(model: type[Model]) -> None:
    singular = str(model._meta.verbose_name)
    plural = str(model._meta.verbose_name_plural)
    assert not naive_plural(singular, plural), (singular, plural)
    # Chosen, not derived from the class name: the migrations record them.
    options = ModelState.from_model(model).options
    assert {"verbose_name", "verbose_name_plural"} <= set(options), model.__name__


def test_the_admin_index_names_webhook_deliveries_properly(user: Any) -> None:
    user.is_staff = user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    html = client.get("/admin/").content.decode()
    assert "Webhook deliveries" in html
    assert "deliverys" not in html.lower()
    registered = [m for m in project_models() if admin.site.is_registered(m)]
    assert registered, "the admin shows the project's models"
    for model in registered:
        assert capfirst(str(model._meta.verbose_name_plural)) in html, model
