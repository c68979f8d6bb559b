"""Model fields for text the server did not choose (tool output, model replies): stored with NUL characters and
lone surrogates replaced (core.text.storable), so a tool printing chr(0) cannot make a step's commit fail.

They deconstruct as Django's own fields: the stored column is the same, so they need no migration.
"""

from django.db import models

from core.engine import jsontext
from core.text import storable


class StorableTextField(models.TextField):
    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return storable(value) if isinstance(value, str) else value

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class JSONField(models.JSONField):
    """Django's JSONField, its dicts and lists encoded by jsontext (orjson where it means what json means): a run's
    usage, a step's sections and an agent's window are written every step."""

    def get_db_prep_value(self, value, connection, prepared=False):
        if prepared or self.encoder is not None or type(value) not in (dict, list):
            return super().get_db_prep_value(value, connection, prepared)
        return self._encoded(value, jsontext.dumps(value), connection)

    @staticmethod
    def _encoded(value, encoded: str, connection):
        if connection.vendor == "postgresql":
            from psycopg.types.json import Jsonb  # Django's own adapter for JSON on PostgreSQL (psycopg 3)

            return Jsonb(value, dumps=lambda _value: encoded)
        return encoded

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class StorableJSONField(JSONField):
    def get_prep_value(self, value):
        return super().get_prep_value(storable(value))

    def get_db_prep_value(self, value, connection, prepared=False):
        # A step's request is tens of kB, stored every step: a dict or list is encoded once, as Django would, and
        # only an encoding that shows a NUL or a surrogate escape takes the cleaning path (which encodes again).
        if prepared or self.encoder is not None or type(value) not in (dict, list):
            return models.JSONField.get_db_prep_value(self, value, connection, prepared)
        encoded = jsontext.dumps(value)
        if "\\u0000" in encoded or "\\ud" in encoded:
            return models.JSONField.get_db_prep_value(self, value, connection, prepared)
        return self._encoded(value, encoded, connection)
