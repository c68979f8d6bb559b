"""What a run of an agent's tests needs of an experiment to be one (0025 moves them): whether the cases' copies are
kept, the agent's version at the start, and on each case result the case's id (kept once the case is deleted) and
its runs' model calls. Its own migration: on PostgreSQL a table altered after rows were written in the same
transaction fails on the pending constraint checks, which migrating 0025 back would do."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0023_queued_tasks"),
    ]

    operations = [
        migrations.AddField(
            model_name="caseresult",
            name="case_key",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="caseresult",
            name="steps",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="experiment",
            name="keep_copies",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="experiment",
            name="version_at_start",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
