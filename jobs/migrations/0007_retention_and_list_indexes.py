# The new owner index is built before the old one goes, so the job list always has one.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0006_job_live_owner_index'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['owner', '-created_at', '-id'], name='job_owner_created_idx'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('idempotency_key__isnull', False)), fields=['idempotency_expires_at'], name='job_key_expiry_idx'),
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='jobs_job_owner_i_6da30c_idx',
        ),
    ]
