"""Updating a row's fields from a dict of changes: the one loop every service's update goes through."""

from typing import Any

from django.db.models import Model


def model_update(
    instance: Model, *, fields: tuple[str, ...] | list[str], data: dict[str, Any], save: bool = True
) -> dict:
    """Set each of `fields` that `data` holds, and save the ones whose value changed (with `updated_at` when the
    model keeps one) in one UPDATE; returns {field: [old, new]} of what changed. `save=False` leaves the saving
    to a caller that changes more of the row (still setting the fields)."""
    changed = {}
    for name in fields:
        if name in data and getattr(instance, name) != data[name]:
            changed[name] = [getattr(instance, name), data[name]]
            setattr(instance, name, data[name])
    if save and changed:
        auto = ["updated_at"] if any(f.name == "updated_at" for f in instance._meta.concrete_fields) else []
        instance.save(update_fields=[*changed, *auto])
    return changed
