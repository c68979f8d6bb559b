"""Model fields for text the server did not choose (tool output, model replies): stored with NUL characters and
lone surrogates replaced (core.text.storable), so a tool printing chr(0) cannot make a step's commit fail.

They deconstruct as Django's own fields: the stored column is the same, so they need no migration.
"""

from django.db import models

from core import jsontext
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
        encoded = jsontext.dumps(value)
        if not self._stored_as_encoded(encoded):
            return super().get_db_prep_value(value, connection, prepared)
        if connection.vendor == "postgresql":
            from psycopg.types.json import Jsonb  # Django's own adapter for JSON on PostgreSQL (psycopg 3)

            return Jsonb(value, dumps=lambda _value: encoded)
        return encoded

    def _stored_as_encoded(self, encoded: str) -> bool:
        return True

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class StorableJSONField(JSONField):
    def get_prep_value(self, value):
        return super().get_prep_value(storable(value))

    def _stored_as_encoded(self, encoded: str) -> bool:
        # A step's request is tens of kB, stored every step: a dict or list is encoded once, and only an encoding
        # that shows a NUL or a surrogate escape takes the cleaning path (get_prep_value, which encodes again).
        return "\\u0000" not in encoded and "\\ud" not in encoded
