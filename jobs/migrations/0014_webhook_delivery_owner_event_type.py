from django.conf import settings
from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):
    """A delivery names its owner and its event, and need not be a job's: the columns,
    nullable until 0015 fills them for the deliveries made before (0016 requires them)."""

    dependencies = [
        ('jobs', '0013_verbose_names'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='webhookdelivery',
            name='owner',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='webhook_deliveries', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='webhookdelivery',
            name='event_type',
            field=models.CharField(default='', max_length=100),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='webhookdelivery',
            name='job',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='webhook_deliveries', to='jobs.job'),
        ),
    ]
