from django.db import migrations, models


def copy_dependency_ids(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(depends_on__isnull=False).distinct().iterator():
        job.dependency_ids = sorted(job.depends_on.values_list("id", flat=True))
        job.save(update_fields=["dependency_ids"])


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0003_job_partial_count"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="dependency_ids",
            field=models.JSONField(blank=True, default=list, editable=False),
        ),
        migrations.RunPython(copy_dependency_ids, migrations.RunPython.noop),
    ]
