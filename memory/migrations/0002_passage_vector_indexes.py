"""HNSW (cosine) indexes for passage embeddings on PostgreSQL.

The column is an untyped `vector` so agents may use embedders of different sizes; pgvector indexes one
dimension at a time, so each common dimension gets a partial expression index, and searches cast with the
same expression (`embedding::vector(N)`) to use it.
"""

from django.db import migrations

DIMENSIONS = (384, 768, 1024, 1536)


def create_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for dim in DIMENSIONS:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS passage_embedding_hnsw_{dim} ON memory_passage "
            f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}"
        )


def drop_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for dim in DIMENSIONS:
        schema_editor.execute(f"DROP INDEX IF EXISTS passage_embedding_hnsw_{dim}")


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]
    operations = [migrations.RunPython(create_indexes, drop_indexes)]
