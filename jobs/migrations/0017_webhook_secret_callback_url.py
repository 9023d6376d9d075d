from django.db import migrations, models


class Migration(migrations.Migration):
    """Where a user's session events go when a session names no address of its own."""

    dependencies = [
        ('jobs', '0016_webhook_delivery_owner_required'),
    ]

    operations = [
        migrations.AddField(
            model_name='webhooksecret',
            name='callback_url',
            field=models.URLField(blank=True, help_text="Where the user's session events go by default.", max_length=2000),
        ),
    ]
