"""DATABASE_URL picks the database; unset or empty (a blank line in .env), the embedded SQLite file."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _database(tmp_path, **env) -> str:
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; d = settings.DATABASES['default']; print(d['ENGINE'], d['NAME'])",
        ],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "agents_ide.settings", "AGENTS_IDE_DATA_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.mark.parametrize("env", [{}, {"DATABASE_URL": ""}])
def test_no_database_url_is_the_embedded_sqlite_file(tmp_path, env):
    assert _database(tmp_path, **env) == f"agents_ide.sqlite {tmp_path / 'agents_ide.sqlite3'}"


def test_a_database_url_names_the_database(tmp_path):
    engine, name = _database(tmp_path, DATABASE_URL="postgres://someone@127.0.0.1:5432/elsewhere").split()
    assert (engine, name) == ("django.db.backends.postgresql", "elsewhere")
