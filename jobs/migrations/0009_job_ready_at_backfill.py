"""Jobs handed to RQ before ready_at existed were ready then.

Queued jobs never handed over stay unset: the sweep's ``waiting_jobs_release``
checks their dependencies (none counts as all done) and holds them for dispatch.
"""

from typing import Any

from django.db import migrations
from django.db.models import F


def ready_at_from_enqueued_at(apps: Any, schema_editor: Any) -> None:
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(enqueued_at__isnull=False, ready_at__isnull=True).update(
        ready_at=F("enqueued_at")
    )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0008_job_ready_at")]

    operations = [migrations.RunPython(ready_at_from_enqueued_at, migrations.RunPython.noop)]
