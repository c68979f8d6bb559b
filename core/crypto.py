"""Secrets at rest: values encrypted with Fernet under SECRETS_KEYS (MultiFernet: the first key encrypts, every key
decrypts, so keys rotate), the model fields that store them so, and the re-encryption of every stored secret.

A stored secret reads `enc:fernet:<token>`; a value without that prefix is plaintext written before encryption came,
read as it is until the data migrations or `manage.py rotate_secrets` encrypt it. With SECRETS_KEYS unset the one key
is derived from SECRET_KEY (HKDF-SHA256), so changing SECRET_KEY alone makes every stored secret unreadable: first set
SECRETS_KEYS to a new key followed by the derived one (`manage.py rotate_secrets --derived-key` prints it), run
`manage.py rotate_secrets`, then change SECRET_KEY and drop the derived key.

Encrypted fields take no lookups but `isnull` (a filter on a value could never match: every encryption differs), and
an object's keys stay plain (variable and header names are shown; their values are not).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.apps import apps as installed_apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models, transaction

PREFIX = "enc:fernet:"
_BATCH = 200

# Every stored secret: model -> its encrypted fields (what `rotate_secrets` writes again).
SECRET_FIELDS: dict[str, tuple[str, ...]] = {
    "core.ProviderConfig": ("api_key",),
    "core.OwnerSettings": ("e2b_api_key",),
    "core.Agent": ("secrets",),
    "tools.Tool": ("env_vars",),
    "tools.McpServer": ("auth_token", "env", "custom_headers"),
}


class SecretUnreadable(Exception):
    """A stored secret that none of the configured keys decrypts."""


@functools.cache
def derived_key(secret_key: str) -> str:
    """The Fernet key HKDF-SHA256 derives from SECRET_KEY: the one key when SECRETS_KEYS is unset."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"agents-ide secrets at rest").derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(raw).decode()


@functools.lru_cache(maxsize=8)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            "SECRETS_KEYS must be comma-separated Fernet keys (32 url-safe base64-encoded bytes each); make one with "
            "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
        ) from None


def _keys() -> MultiFernet:
    # Read at each call, not at import: tests and `rotate_secrets` see the keys in force now.
    return _fernet(tuple(settings.SECRETS_KEYS) or (derived_key(settings.SECRET_KEY),))


def is_encrypted(stored: object) -> bool:
    return isinstance(stored, str) and stored.startswith(PREFIX)


def encrypt(text: str) -> str:
    """The stored form of `text`, encrypted under the first key."""
    return PREFIX + _keys().encrypt(text.encode()).decode()


def decrypt(stored: str) -> str:
    """The plaintext of a stored value (one stored before encryption came is plaintext already)."""
    if not is_encrypted(stored):
        return stored
    try:
        return _keys().decrypt(stored[len(PREFIX) :].encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "A stored secret was encrypted under a key that is not in SECRETS_KEYS (or SECRET_KEY changed while "
            "SECRETS_KEYS was unset): add the old key to SECRETS_KEYS."
        ) from None


class _NoValueLookups:
    """Only `isnull` filters: a filter on a value compares ciphertext, which never matches."""

    def get_lookup(self, lookup_name):
        return super().get_lookup(lookup_name) if lookup_name == "isnull" else None

    def get_transform(self, lookup_name):
        return None


class EncryptedTextField(_NoValueLookups, models.TextField):
    """A text column holding its value encrypted; "" is stored as "" (nothing to hide, and `if row.api_key` stays
    a plain check)."""

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return encrypt(value) if isinstance(value, str) and value else value

    def from_db_value(self, value, expression, connection):
        return decrypt(value) if value else value


class EncryptedJSONField(_NoValueLookups, models.JSONField):
    """A JSON object of secrets (environment variables, headers): its keys plain, each value's JSON encrypted."""

    def get_prep_value(self, value):
        if isinstance(value, Mapping):
            value = {key: encrypt(json.dumps(item)) for key, item in value.items()}
        return super().get_prep_value(value)

    def from_db_value(self, value, expression, connection):
        value = super().from_db_value(value, expression, connection)
        if not isinstance(value, dict):
            return value
        return {key: json.loads(decrypt(item)) if is_encrypted(item) else item for key, item in value.items()}


def secrets_reencrypt(*, apps=None, fields: Mapping[str, tuple[str, ...]] = SECRET_FIELDS) -> dict[str, int]:
    """Write every stored secret again, encrypted under the first key (plaintext ones get encrypted); returns the rows
    written per model. Locks each batch of rows while it rewrites them, so a secret changed meanwhile is kept. `apps`
    is a migration's historical registry (default: the installed models)."""
    registry = apps or installed_apps
    written = {}
    for label, names in fields.items():
        model = registry.get_model(label)
        manager = model._default_manager
        pks = list(manager.order_by("pk").values_list("pk", flat=True))
        count = 0
        for start in range(0, len(pks), _BATCH):
            with transaction.atomic():
                rows = manager.select_for_update().filter(pk__in=pks[start : start + _BATCH]).only("pk", *names)
                for row in rows:
                    values = {name: getattr(row, name) for name in names}
                    if any(values.values()):
                        manager.filter(pk=row.pk).update(**values)
                        count += 1
        written[label] = count
    return written


def secrets_write_plain(*, apps=None, fields: Mapping[str, tuple[str, ...]] = SECRET_FIELDS) -> None:
    """Write every stored secret back as plaintext (undoing the data migrations, before the fields become plain
    again); locks each batch of rows while it rewrites them."""
    registry = apps or installed_apps
    for label, names in fields.items():
        model = registry.get_model(label)
        manager = model._default_manager
        pks = list(manager.order_by("pk").values_list("pk", flat=True))
        for start in range(0, len(pks), _BATCH):
            with transaction.atomic():
                rows = manager.select_for_update().filter(pk__in=pks[start : start + _BATCH]).only("pk", *names)
                for row in rows:
                    plain = {
                        name: models.Value(getattr(row, name), output_field=_plain_field(model, name)) for name in names
                    }
                    manager.filter(pk=row.pk).update(**plain)


def _plain_field(model, name: str) -> models.Field:
    """The column's type without encryption: a value bound through it is stored as it is."""
    return models.JSONField() if isinstance(model._meta.get_field(name), models.JSONField) else models.TextField()
