# The admin's job list filtered by status or by tool, in its own order.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0006_retention_and_reaper_indexes'),
        ('jobs', '0010_list_filter_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['status', '-created_at', '-id'], name='job_status_created_idx'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['tool', '-created_at', '-id'], name='job_tool_created_idx'),
        ),
    ]
