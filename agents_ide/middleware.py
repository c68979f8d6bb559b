"""Keeps every `/v1` answer JSON: Django's own 404 page and ninja's bare 405 become Letta-style `{"detail": …}`.

Sync and async capable, like the project's other middleware, so API requests are not serialized on one thread.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import JsonResponse

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
    out = JsonResponse({"detail": f"Method {request.method} is not allowed on {request.path}",
                        "allowed_methods": [m.strip() for m in allowed.split(",") if m.strip()]}, status=405)
    if allowed:
        out["Allow"] = allowed
    return out


class JsonApiErrorsMiddleware:
    """Replace the HTML (or empty) body of a 404/405 under `/v1/` with a JSON error."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.async_mode:
            return self.__acall__(request)
        return _json_error(request, self.get_response(request))

    async def __acall__(self, request):
        return _json_error(request, await self.get_response(request))
