"""Datasets may hold an agent's own tests (Dataset.tests_of); 0022 moves the tests there. Two migrations, since
PostgreSQL refuses a schema change in the transaction that wrote rows with deferred constraint checks."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0020_scheduled_messages"),
    ]

    operations = [
        migrations.AddField(
            model_name="dataset",
            name="tests_of",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="tests_dataset",
                to="core.agent",
            ),
        ),
    ]
