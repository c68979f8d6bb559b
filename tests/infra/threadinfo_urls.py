"""A URLconf for tests of the ASGI handler: which thread and database connection served a request."""

import itertools
import threading
import time

from django.db import connection
from django.http import JsonResponse
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


urlpatterns = [path("whoami", whoami)]
