"""`manage.py rotate_secrets [--derived-key]`: write every stored secret again under the first of SECRETS_KEYS.

Rotating keys: put the new key first in SECRETS_KEYS (keeping the old ones after it), restart, run this command, then
drop the old keys. Plaintext left from before encryption is encrypted too. `--derived-key` prints the key derived
from SECRET_KEY (what encrypts when SECRETS_KEYS is unset), to list it in SECRETS_KEYS before SECRET_KEY changes.
"""

from django.conf import settings
from django.core.management.base import BaseCommand

from core.crypto import derived_key, secrets_reencrypt


class Command(BaseCommand):
    help = "Re-encrypt every stored secret under the first of SECRETS_KEYS (or print the SECRET_KEY-derived key)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--derived-key",
            dest="print_derived_key",
            action="store_true",
            help="print the key derived from SECRET_KEY and change nothing",
        )

    def handle(self, *args, print_derived_key: bool = False, **options):
        if print_derived_key:
            self.stdout.write(derived_key(settings.SECRET_KEY))
            return
        for label, rows in secrets_reencrypt().items():
            self.stdout.write(f"{label}: {rows} row(s) re-encrypted")
