# The job list's filters by status, tool and session each get an index in the list's
# order. The session's index is built before the foreign key's own one goes, so
# a session's jobs always have one.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0006_retention_and_reaper_indexes'),
        ('jobs', '0009_job_ready_at_backfill'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['session', '-created_at', '-id'], name='job_session_created_idx'),
        ),
        migrations.AlterField(
            model_name='job',
            name='session',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to='agent_sessions.agentsession'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['owner', 'status', '-created_at', '-id'], name='job_owner_status_idx'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['owner', 'tool', '-created_at', '-id'], name='job_owner_tool_idx'),
        ),
    ]
