# Indexes for retention (sessions deleted longest ago) and for the run reaper (live runs only).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0005_run_live_owner_index'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='agentsession',
            index=models.Index(condition=models.Q(('deleted_at__isnull', False)), fields=['deleted_at'], name='session_deleted_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['status', 'created_at'], name='run_status_created_idx'),
        ),
    ]
