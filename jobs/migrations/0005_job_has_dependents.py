from django.db import migrations, models


def flag_jobs_with_dependents(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(dependents__isnull=False).update(has_dependents=True)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_job_dependency_ids"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="has_dependents",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.RunPython(flag_jobs_with_dependents, migrations.RunPython.noop),
    ]
