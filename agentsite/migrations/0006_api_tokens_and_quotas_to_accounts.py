# ApiToken and UserQuota belong to the accounts app now (accounts' 0001 took them
# over): they leave agentsite's state only. Their tables and rows stay.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('agentsite', '0005_pending_approvals_quota'),
        ('accounts', '0001_api_tokens_and_quotas_from_agentsite'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='ApiToken'),
                migrations.DeleteModel(name='UserQuota'),
            ],
            database_operations=[],
        ),
    ]
