import django.db.models
from django.db import migrations

import core.fields


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0016_evals_datasets_experiments"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="feedback",
            field=django.db.models.CharField(blank=True, default="", max_length=8),
        ),
        migrations.AddField(
            model_name="step",
            name="feedback_comment",
            field=core.fields.StorableTextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="step",
            name="tags",
            field=django.db.models.JSONField(blank=True, default=list),
        ),
    ]
