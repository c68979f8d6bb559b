"""`manage.py create_api_token USERNAME [--create-user]`: print a new API token (for scripts and CI)."""

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from core.accounts import api_token_create, user_create


class Command(BaseCommand):
    help = "Create an API token for USERNAME (optionally creating the user) and print it."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", help="create the user (no password) if missing")
        parser.add_argument("--name", default="cli", help="a name for the token")

    def handle(self, *args, username: str, create_user: bool, name: str, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"No user named {username!r}; pass --create-user to create one.")
            user = user_create(username=username, password=None)
        _, raw = api_token_create(user=user, name=name)
        self.stdout.write(raw)
