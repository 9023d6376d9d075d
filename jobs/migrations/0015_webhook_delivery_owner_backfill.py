"""Deliveries made before 0014 were all jobs' callbacks: their owner is the job's,
their event the body's ``type``."""

from typing import Any

from django.db import migrations
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.fields.json import KT


def owner_and_event_from_job(apps: Any, schema_editor: Any) -> None:
    WebhookDelivery = apps.get_model("jobs", "WebhookDelivery")
    Job = apps.get_model("jobs", "Job")
    WebhookDelivery.objects.filter(owner__isnull=True).update(
        owner_id=Subquery(Job.objects.filter(pk=OuterRef("job_id")).values("owner_id")[:1]),
        event_type=Coalesce(KT("payload__type"), Value("")),
    )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0014_webhook_delivery_owner_event_type")]

    operations = [migrations.RunPython(owner_and_event_from_job, migrations.RunPython.noop)]
