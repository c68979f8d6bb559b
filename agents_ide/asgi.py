"""ASGI entry point: HTTP (Django + static files) and websockets (channels) from one daphne process."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")

from agents_ide.http import http_application  # noqa: E402

django_http = http_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from agents_ide.gc_tuning import settle  # noqa: E402
from agents_ide.proxies import TrustedProxyHeaders  # noqa: E402
from agents_ide.routing import websocket_urlpatterns  # noqa: E402
from agents_ide.security import FullOriginValidator  # noqa: E402
from agents_ide.upload_names import UploadNameGuard  # noqa: E402
from core.engine import tokens  # noqa: E402
from core.llm.client import warm_up  # noqa: E402  (cheap: litellm itself is imported by warm_up)

# Outermost: behind a trusted reverse proxy, everything below sees the client's own address (TRUSTED_PROXIES).
application = TrustedProxyHeaders(
    ProtocolTypeRouter(
        {
            # Static assets are vendored and small; serving them here keeps the IDE a single process.
            # A NUL in an upload's file name is refused before Django's parser would drop it.
            "http": ASGIStaticFilesHandler(UploadNameGuard(django_http)),
            "websocket": FullOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)


def _warm_up() -> None:
    """Load what the first requests would otherwise wait on: the URLconf with every view module, litellm (seconds to
    import), the two OpenAI token encodings; then settle the garbage collector."""
    from django.urls import reverse

    reverse("healthz")  # imports the URLconf, and with it every view module
    warm_up()
    tokens.warm_up()
    settle()


if os.environ.get("AIDE_WARM_UP", "1") != "0":
    # Before serving: daphne listens once this module is imported, so no request waits on the warm-up (in a thread,
    # the first request after start took 0.4-3 s instead of a few ms). The test suite's servers skip it.
    _warm_up()


from core.accounts import setup_token_announce  # noqa: E402

# A fresh install others may reach (HOST or PUBLIC_BASE_URL beyond loopback): the first account needs the token this
# prints on the console.
setup_token_announce()


if os.environ.get("AIDE_START_RUNS", "1") != "0":
    # Sweep lapsed run leases now (a crashed process's runs heal without waiting for a new run) and, on the
    # embedded default, start the run pool.
    from core.runs.queue import start_with_server  # noqa: E402

    start_with_server()
