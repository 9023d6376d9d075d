# The sessions of tasks that already have push notification configurations are
# watched (sessions.log_watch), as a configuration set from now on makes them.

from django.db import migrations


def forwards(apps, schema_editor):
    AgentSession = apps.get_model('agent_sessions', 'AgentSession')
    PushConfig = apps.get_model('a2a_api', 'PushConfig')
    db = schema_editor.connection.alias
    configured = PushConfig.objects.using(db).values('task__session_id')
    AgentSession.objects.using(db).filter(pk__in=configured).update(watched=True)


class Migration(migrations.Migration):

    dependencies = [
        ('a2a_api', '0002_push_configs'),
        ('agent_sessions', '0010_session_watched'),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
