from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _repair_fulltext(sender, using, **kwargs) -> None:
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    # post_migrate receivers run with the app registry ready; AppConfig modules are imported before it is
    from memory.search.fts_schema import fts_ensure

    connection = connections[using]
    if (
        MigrationRecorder(connection)
        .migration_qs.filter(app="memory", name__in=("0003_fulltext_search", "0004_passage_revision"))
        .exists()
    ):
        fts_ensure(connection)


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # SQLite drops a table's triggers when a migration rebuilds it; recreate them after every migrate.
        post_migrate.connect(_repair_fulltext, sender=self, dispatch_uid="memory_repair_fulltext")
