# ApiToken and UserQuota were the agentsite app's models: this app takes them over
# as they are. Their tables keep their names and rows; only Django's state moves
# (agentsite's 0006 drops them from its own state after this).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('agentsite', '0005_pending_approvals_quota'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(blank=True, max_length=100)),
                        ('prefix', models.CharField(editable=False, max_length=12)),
                        ('token_hash', models.CharField(editable=False, max_length=64, unique=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('expires_at', models.DateTimeField(blank=True, null=True)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name': 'API token',
                        'verbose_name_plural': 'API tokens',
                        'db_table': 'agentsite_apitoken',
                    },
                ),
                migrations.CreateModel(
                    name='UserQuota',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('live_jobs', models.PositiveIntegerField(blank=True, help_text='Jobs queued or running at once.', null=True)),
                        ('live_turns', models.PositiveIntegerField(blank=True, help_text='Model turns queued or running at once.', null=True)),
                        ('messages_per_minute', models.PositiveIntegerField(blank=True, help_text='Messages sent in any 60 seconds.', null=True)),
                        ('mcp_sessions', models.PositiveIntegerField(blank=True, help_text='MCP sessions open at once (per web process).', null=True)),
                        ('pending_approvals', models.PositiveIntegerField(blank=True, help_text='Requests for approval and questions pending at once.', null=True)),
                        ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='quota', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name': 'user quota',
                        'verbose_name_plural': 'user quotas',
                        'db_table': 'agentsite_userquota',
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
