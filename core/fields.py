"""Model fields for text the server did not choose (tool output, model replies): stored with NUL characters and
lone surrogates replaced (core.text.storable), so a tool printing chr(0) cannot make a step's commit fail.

They deconstruct as Django's own fields: the stored column is the same, so they need no migration.
"""

from django.db import models

from core.text import storable


class StorableTextField(models.TextField):
    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return storable(value) if isinstance(value, str) else value

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class StorableJSONField(models.JSONField):
    def get_prep_value(self, value):
        return super().get_prep_value(storable(value))

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
