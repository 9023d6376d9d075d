from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def count_existing_chunks(apps, schema_editor):
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
        migrations.RunPython(count_existing_chunks, migrations.RunPython.noop),
    ]
