"""The project's middleware base, and the middleware that keeps every `/v1` answer JSON."""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import JsonResponse


class SyncAsyncMiddleware:
    """Base of the project's middleware: serves a sync or an async handler chain natively. (Django's
    MiddlewareMixin runs sync hooks in an async stack through sync_to_async: a hop to another thread per
    request and middleware, which also serializes requests on Django's one sync thread.)

    Subclasses write the cheap, non-blocking hooks `before` (a response ends the request there) and `after`;
    one whose check does I/O overrides `ahandle` to run it off the event loop.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        return self.ahandle(request) if self.async_mode else self.handle(request)

    def handle(self, request):
        return self.before(request) or self.after(request, self.get_response(request))

    async def ahandle(self, request):
        return self.before(request) or self.after(request, await self.get_response(request))

    def before(self, request):
        return None

    def after(self, request, response):
        return response


class SyncChain:
    """Last in MIDDLEWARE, and sync only: Django then runs every middleware before it synchronously too (a sync-only
    middleware makes the chain outside it sync where the middleware can be), so a request's middleware hooks run on
    its thread in one pass with the view instead of each hook hopping from the event loop to the thread and back
    (about fifteen hops a request with Django's own middleware). The view itself is still Django's to call."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)


API_PREFIX = "/v1/"
_DOCS = ("/v1/docs", "/v1/openapi.json")


def _json_error(request, response):
    if not request.path.startswith(API_PREFIX) or request.path.startswith(_DOCS):
        return response
    if response.status_code not in (404, 405) or response.get("Content-Type", "").startswith("application/json"):
        return response
    if response.status_code == 404:
        body = {"detail": f"Not found: no API route {request.method} {request.path}"}
        return JsonResponse(body, status=404)
    allowed = response.get("Allow", "")
    out = JsonResponse(
        {
            "detail": f"Method {request.method} is not allowed on {request.path}",
            "allowed_methods": [m.strip() for m in allowed.split(",") if m.strip()],
        },
        status=405,
    )
    if allowed:
        out["Allow"] = allowed
    return out


class JsonApiErrorsMiddleware(SyncAsyncMiddleware):
    """Replace the HTML (or empty) body of a 404/405 under `/v1/` with a JSON error (Django's own 404 page and
    ninja's bare 405 become Letta-style `{"detail": …}`)."""

    def after(self, request, response):
        return _json_error(request, response)
