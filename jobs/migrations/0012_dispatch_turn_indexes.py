# jobs.dispatch: the owners with held jobs and their oldest, and when each was last served.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0006_retention_and_reaper_indexes'),
        ('jobs', '0011_admin_filter_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('enqueued_at__isnull', True), ('ready_at__isnull', False), ('status', 'queued')), fields=['owner', 'ready_at', 'id'], name='job_held_owner_idx'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('enqueued_at__isnull', False)), fields=['owner', 'enqueued_at'], name='job_served_idx'),
        ),
    ]
