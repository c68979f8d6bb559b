"""Every request gets an id (the caller's X-Request-ID when it is a sane one), bound for the logs and sent back, and
one log line when it is answered (agents_ide.requests, INFO): method, path, status, duration, user."""

import logging
import re
import time
import uuid

from agents_ide.middleware import SyncAsyncMiddleware
from core.telemetry import logs, metrics

log = logging.getLogger("agents_ide.requests")
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestLogMiddleware(SyncAsyncMiddleware):
    # The ids are bound around the whole request in one frame: a request that ends without reaching `after` (an
    # exception, a cancelled task) unbinds them too, in the context that bound them.
    def handle(self, request):
        self.start(request)
        with logs.request_bound(request, request.request_id):
            return self.after(request, self.get_response(request))

    async def ahandle(self, request):
        self.start(request)
        with logs.request_bound(request, request.request_id):
            return self.after(request, await self.get_response(request))

    def start(self, request):
        given = request.headers.get("X-Request-ID", "")
        request.request_id = given if _SANE_ID.fullmatch(given) else uuid.uuid4().hex
        request.log_started = time.perf_counter()

    def after(self, request, response):
        user = getattr(getattr(request, "principal", None), "user", None) or getattr(request, "user", None)
        name = user.get_username() if user is not None and user.is_authenticated else ""
        method = request.method if request.method in _METHODS else "other"  # a label: a bounded set
        metrics.HTTP_REQUESTS.labels(method, str(response.status_code)).inc()
        if response.status_code >= 500:
            metrics.ERRORS.labels("http_5xx").inc()
        log.info(
            "%s %s %s",
            request.method,
            request.path,
            response.status_code,
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - request.log_started) * 1000, 1),
                "user": name or None,
            },
        )
        response["X-Request-ID"] = request.request_id
        return response
