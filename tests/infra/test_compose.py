"""compose.yaml ships no password: PostgreSQL's and Redis's come from the environment (compose refuses to start
without them), neither service publishes a host port, Redis requires its password, and the URLs the app reads carry
them in a form its settings accept (a password in REDIS_URL works for the channel layer and the cache)."""

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import dj_database_url
import pytest
import redis
import yaml

from tests.conftest import IN_CI

COMPOSE = Path(__file__).resolve().parents[2] / "compose.yaml"
REQUIRED = re.compile(r"^\$\{(?P<name>[A-Z_]+):\?[^}]+\}$")


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _interpolate(value: str, env: dict) -> str:
    """Compose's `${NAME:?message}` and `${NAME:-default}` (all this file uses): refuse an unset or empty required
    variable, as `docker compose` does."""

    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise ValueError(f"{name}: {arg}")
        return arg

    return re.sub(r"\$\{([A-Z_]+)(:\?|:-)([^}]*)\}", one, value)


def test_the_databases_publish_no_host_port():
    services = _compose()["services"]
    for name in ("db", "redis"):
        assert "ports" not in services[name] and "network_mode" not in services[name], name
    assert [name for name, service in services.items() if "ports" in service] == ["web"]


def test_no_password_is_written_in_the_file():
    compose = _compose()
    db, redis_service, app = compose["services"]["db"], compose["services"]["redis"], compose["x-app"]["environment"]
    assert REQUIRED.match(db["environment"]["POSTGRES_PASSWORD"]).group("name") == "POSTGRES_PASSWORD"
    command = redis_service["command"]
    assert REQUIRED.match(command[command.index("--requirepass") + 1]).group("name") == "REDIS_PASSWORD"
    assert REQUIRED.match(app["SECRET_KEY"]).group("name") == "SECRET_KEY"
    assert REQUIRED.match(re.fullmatch(r"postgres://agents:(.+)@db:5432/\w+", app["DATABASE_URL"]).group(1))
    assert REQUIRED.match(re.fullmatch(r"redis://:(.+)@redis:6379/0", app["REDIS_URL"]).group(1))
    assert "agents:agents@" not in COMPOSE.read_text()


def test_compose_refuses_to_start_without_the_passwords():
    app = _compose()["x-app"]["environment"]
    env = {"SECRET_KEY": "k", "POSTGRES_PASSWORD": "pg0secret", "REDIS_PASSWORD": "rd0secret"}
    database = dj_database_url.parse(_interpolate(app["DATABASE_URL"], env))
    assert (database["USER"], database["PASSWORD"], database["HOST"]) == ("agents", "pg0secret", "db")
    assert redis.connection.parse_url(_interpolate(app["REDIS_URL"], env))["password"] == "rd0secret"
    for name in env:
        with pytest.raises(ValueError, match=name):
            for value in app.values():
                _interpolate(value, {**env, name: ""})


@pytest.fixture
def redis_with_password(tmp_path):
    """A Redis server of our own on a free loopback port that requires a password."""
    if shutil.which("redis-server") is None:
        if IN_CI:
            pytest.fail("redis-server is not installed")
        pytest.skip("missing service: redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--requirepass", "pw0secret"]
        + ["--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=port, password="pw0secret").ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(10)


def test_settings_use_a_password_in_redis_url(redis_with_password, settings):
    from channels_redis.pubsub import RedisPubSubChannelLayer
    from django.core.cache.backends.redis import RedisCache

    from agents_ide.settings import redis_channel_layers
    from core import events

    url = f"redis://:pw0secret@127.0.0.1:{redis_with_password}/0"
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(f"redis://127.0.0.1:{redis_with_password}/0").ping()
    layer = RedisPubSubChannelLayer(**redis_channel_layers(url)["default"]["CONFIG"])
    events._group_send(layer, "agent.x", {"type": "agent.event"})  # authenticated, or it raises
    cache = RedisCache(url, {})
    cache.set("login-fail:probe", 1)
    assert cache.get("login-fail:probe") == 1


def test_the_trusted_proxies_setting_is_passed_to_the_app():
    """Behind the reverse proxy the docs recommend, the operator names it; unset, nobody's X-Forwarded-For counts."""
    app = _compose()["x-app"]["environment"]
    assert _interpolate(app["TRUSTED_PROXIES"], {}) == ""
    assert _interpolate(app["TRUSTED_PROXIES"], {"TRUSTED_PROXIES": "172.18.0.0/16"}) == "172.18.0.0/16"
    assert 'TRUSTED_PROXIES=""' in (COMPOSE.parent / "Dockerfile").read_text()
