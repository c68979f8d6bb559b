"""Small helpers shared by tests that start servers or wait for background work."""

import asyncio
import socket
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    """DATABASE_URL for a process that must open the test database this process uses."""
    from django.db import connection

    d = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{d['NAME']}"
    auth = d["USER"] + (f":{d['PASSWORD']}" if d.get("PASSWORD") else "")
    return f"postgres://{auth}@{d.get('HOST') or '127.0.0.1'}:{d.get('PORT') or 5432}/{d['NAME']}"


def until(predicate, timeout: float = 90.0, interval: float = 0.05, what: str = "condition"):
    """Poll until `predicate()` returns something truthy and return it; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


async def until_async(predicate, timeout: float = 90.0, interval: float = 0.02, what: str = "condition"):
    """`until` for async tests: poll without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def require_redis(url: str) -> None:
    """Skip the test when Redis does not answer at `url`; in CI, fail it (Redis is part of the CI machine)."""
    import pytest
    import redis

    from tests.conftest import IN_CI

    try:
        redis.Redis.from_url(url, socket_timeout=2).ping()
    except redis.RedisError:
        if IN_CI:
            pytest.fail(f"Redis is not reachable at {url}")
        pytest.skip(f"Redis is not reachable at {url}")
