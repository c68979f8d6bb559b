"""ASGI entry point: HTTP (Django + static files) and websockets (channels) from one daphne process."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")

from agents_ide.http import http_application  # noqa: E402

django_http = http_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from agents_ide.gc_tuning import settle  # noqa: E402
from agents_ide.routing import websocket_urlpatterns  # noqa: E402
from agents_ide.security import FullOriginValidator  # noqa: E402
from core.engine import tokens  # noqa: E402
from core.llm.client import warm_up  # noqa: E402  (cheap: litellm itself is imported by warm_up)

application = ProtocolTypeRouter(
    {
        # Static assets are vendored and small; serving them here keeps the IDE a single process.
        "http": ASGIStaticFilesHandler(django_http),
        "websocket": FullOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


def _warm_up_llm() -> None:
    warm_up()
    tokens.warm_up()
    settle()


if os.environ.get("AIDE_WARM_UP", "1") != "0":
    # litellm takes seconds to import; do it while the server starts, not on the first message.
    import threading  # noqa: E402

    threading.Thread(target=_warm_up_llm, name="llm-warm-up", daemon=True).start()


if os.environ.get("AIDE_START_RUNS", "1") != "0":
    # Sweep lapsed run leases now (a crashed process's runs heal without waiting for a new run) and, on the
    # embedded default, start the run pool.
    from core.runs.queue import start_with_server  # noqa: E402

    start_with_server()
