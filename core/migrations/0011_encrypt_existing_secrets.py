"""Encrypt the secrets stored before encryption came (core.crypto: read as plaintext until then)."""

from django.db import migrations

from core.crypto import secrets_reencrypt, secrets_write_plain

# As the models stood at this migration (core.crypto.SECRET_FIELDS may grow later).
FIELDS = {
    "core.ProviderConfig": ("api_key",),
    "core.OwnerSettings": ("e2b_api_key",),
    "core.Agent": ("secrets",),
}


def encrypt_existing(apps, schema_editor):
    secrets_reencrypt(apps=apps, fields=FIELDS)


def decrypt_existing(apps, schema_editor):
    secrets_write_plain(apps=apps, fields=FIELDS)


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0010_secrets_encrypted'),
    ]

    operations = [
        migrations.RunPython(encrypt_existing, decrypt_existing),
    ]
