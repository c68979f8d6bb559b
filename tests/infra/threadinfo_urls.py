"""A URLconf for tests of the ASGI handler: which thread and database connection served a request."""

import asyncio
import itertools
import threading
import time

from django.db import connection
from django.http import JsonResponse, StreamingHttpResponse
from django.urls import path

_local = threading.local()
_serials = itertools.count()
_connections: list = []  # kept alive, so a new connection can never pass for an old one


def whoami(request):
    if not hasattr(_local, "serial"):  # the OS reuses thread idents; a serial per thread does not
        _local.serial = next(_serials)
    connection.ensure_connection()
    raw = connection.connection
    index = next((i for i, c in enumerate(_connections) if c is raw), None)
    if index is None:
        _connections.append(raw)
        index = len(_connections) - 1
    time.sleep(float(request.GET.get("sleep", "0")))
    return JsonResponse({"thread": _local.serial, "connection": index})


stream_events: list[str] = []  # what the streamed view's generator did: "part N", "closed"


def stream(request):
    """Three parts, the third after `wait` seconds (a client may leave before)."""
    wait = float(request.GET.get("wait", "0"))

    async def parts():
        try:
            for n in range(3):
                if n == 2:
                    await asyncio.sleep(wait)
                stream_events.append(f"part {n}")
                yield f"part {n};".encode()
        finally:
            stream_events.append("closed")

    return StreamingHttpResponse(parts(), content_type="text/plain")


urlpatterns = [path("whoami", whoami), path("stream", stream)]
