from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def fill_for_existing_jobs(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    JobChunk = apps.get_model("jobs", "JobChunk")
    counts = (
        JobChunk.objects.filter(job=OuterRef("pk"))
        .order_by()
        .values("job")
        .annotate(n=Count("pk"))
        .values("n")
    )
    Job.objects.filter(chunks__isnull=False).distinct().update(
        partial_count=Coalesce(Subquery(counts), 0)
    )
    Job.objects.filter(dependents__isnull=False).update(has_dependents=True)
    for job in Job.objects.filter(depends_on__isnull=False).distinct().iterator():
        job.dependency_ids = sorted(job.depends_on.values_list("id", flat=True))
        job.save(update_fields=["dependency_ids"])


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_job_events_webhooks"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="partial_count",
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name="job",
            name="dependency_ids",
            field=models.JSONField(blank=True, default=list, editable=False),
        ),
        migrations.AddField(
            model_name="job",
            name="has_dependents",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.RunPython(fill_for_existing_jobs, migrations.RunPython.noop),
    ]
