"""Settings for the daphne process of tests/infra/test_shutdown.py: the project's middleware and request threads,
a view that outlives the server beside the project's URLs, and no first-run form (the test database has
no account)."""

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.infra.shutdown_urls"
MIDDLEWARE = [m for m in MIDDLEWARE if m != "core.web.middleware.FirstRunMiddleware"]  # noqa: F405
