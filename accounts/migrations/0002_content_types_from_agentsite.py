# The content types of ApiToken and UserQuota follow them from agentsite to
# accounts, so the permissions granted on them (and the admin's history of them)
# still point at them. A fresh database has none yet: nothing to do there.

from django.db import migrations

MODELS = ['apitoken', 'userquota']


def relabel(apps, schema_editor, *, old, new):
    ContentType = apps.get_model('contenttypes', 'ContentType')
    db = schema_editor.connection.alias
    for model in MODELS:
        if not ContentType.objects.using(db).filter(app_label=new, model=model).exists():
            ContentType.objects.using(db).filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor):
    relabel(apps, schema_editor, old='agentsite', new='accounts')


def backwards(apps, schema_editor):
    relabel(apps, schema_editor, old='accounts', new='agentsite')


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_api_tokens_and_quotas_from_agentsite'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
