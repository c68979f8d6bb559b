"""The models and the migrations describe the same schema (a constraint dropped from a model by accident
would otherwise go unnoticed until someone ran makemigrations)."""

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree():
    try:
        call_command("makemigrations", "--check", "--dry-run", verbosity=0)
    except SystemExit as exc:
        pytest.fail(f"models have changes with no migration (makemigrations --check exited {exc.code})")
