"""PUBLIC_BASE_URL, the address tools call back to, defaults to where scripts/serve listens (HOST/PORT)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _setting(**env) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT", "PUBLIC_BASE_URL")}
    out = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.PUBLIC_BASE_URL)"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "http://127.0.0.1:8000"),
        ({"PORT": "8123"}, "http://127.0.0.1:8123"),
        ({"HOST": "0.0.0.0", "PORT": "9001"}, "http://127.0.0.1:9001"),  # a wildcard bind is reached on loopback
        ({"HOST": "::", "PORT": "9001"}, "http://127.0.0.1:9001"),
        ({"HOST": "::1", "PORT": "9002"}, "http://[::1]:9002"),
        ({"HOST": "10.1.2.3", "PORT": "80"}, "http://10.1.2.3:80"),
        ({"PORT": "8123", "PUBLIC_BASE_URL": "https://ide.example.org"}, "https://ide.example.org"),
    ],
)
def test_public_base_url_follows_host_and_port(env, expected):
    assert _setting(**env) == expected


def test_scripts_serve_exports_host_and_port():
    serve = (ROOT / "scripts" / "serve").read_text()
    assert "export HOST=" in serve and "export PORT=" in serve
