"""Full-text search over recall memory (core_message.text) and archival memory (memory_passage.text):
GIN indexes on PostgreSQL, FTS5 tables kept in sync by triggers on SQLite (see memory/search/fts_schema.py)."""

from django.db import migrations


def create(apps, schema_editor):
    from memory.search.fts_schema import fts_ensure

    fts_ensure(schema_editor.connection)


def drop(apps, schema_editor):
    from memory.search.fts_schema import fts_drop

    fts_drop(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("core", "0001_initial"), ("memory", "0002_passage_vector_indexes")]
    operations = [migrations.RunPython(create, drop)]
