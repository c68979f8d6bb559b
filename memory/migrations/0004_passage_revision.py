"""SQLite: a per-agent passage revision counter kept by triggers (the vector cache's freshness check).
Re-runs the idempotent memory/search/fts_schema.fts_ensure, which now also creates it."""

from django.db import migrations


def create(apps, schema_editor):
    from memory.search.fts_schema import fts_ensure

    fts_ensure(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_fulltext_search")]
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
