"""A busy database answers 503 with Retry-After, never a 500.

SQLite's "database is locked" (and our writer lock's "no write turn within 30 s", agents_ide.sqlite), PostgreSQL's lock
and statement timeouts, deadlocks, "too many connections" and a connection pool with none to lend are all the
database saying "not now": Django raises them as OperationalError (our writer lock raises SQLite's own when a
transaction begins). The API maps them in agents_ide.api; a page, or anything raised outside a view (a session saved
by middleware), reaches `server_error`, Django's handler500, which answers them the same way.
"""

import logging
import sqlite3
import sys

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

log = logging.getLogger(__name__)

BUSY_ERRORS = (OperationalError, sqlite3.OperationalError)
RETRY_AFTER_S = 5
MESSAGE = "The database is busy; nothing was changed by this request. Try again in a few seconds."


def busy_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """503 with Retry-After: JSON under /v1/, a page elsewhere. Logs the error once (it is the operator's to see)."""
    log.warning("database busy on %s %s: %s", request.method, request.path, exc)
    if request.path.startswith("/v1/"):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:
        html = render_to_string("503.html", {"message": MESSAGE, "retry_after": RETRY_AFTER_S})
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a busy database's error gets its 503; anything else Django's 500 page. Django calls it while the
    exception is being handled, so `sys.exc_info()` names it."""
    exc = sys.exc_info()[1]
    if isinstance(exc, BUSY_ERRORS):
        return busy_response(request, exc)
    return defaults.server_error(request)
