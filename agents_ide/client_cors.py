"""CORS for client-side access tokens: a browser front end on a token's `hostname` calls the API from another origin,
so its preflight is answered and its answers carry Access-Control-Allow-Origin, for origins a live token names only.
What a request may do is still its token's policy (core.accounts.client_token_check)."""

from channels.db import database_sync_to_async
from django.http import HttpResponse

from agents_ide.middleware import SyncAsyncMiddleware
from core.accounts import client_origin_allowed

ALLOWED_HEADERS = "authorization, content-type, x-api-key, user_id, x-project"
ALLOWED_METHODS = "GET, POST, PATCH, DELETE, OPTIONS"
MAX_AGE_S = "600"


def _cross_origin(request) -> str | None:
    """The request's Origin when it is a cross-origin API call (else None)."""
    origin = request.headers.get("Origin")
    if not origin or not request.path.startswith("/v1/"):
        return None
    return None if origin.rstrip("/") == f"{request.scheme}://{request.get_host()}" else origin


class ClientTokenCorsMiddleware(SyncAsyncMiddleware):
    def handle(self, request):
        origin = _cross_origin(request)
        allowed = bool(origin) and client_origin_allowed(origin)
        return self._answer(request, origin if allowed else None)

    async def ahandle(self, request):
        origin = _cross_origin(request)
        allowed = bool(origin) and await database_sync_to_async(client_origin_allowed)(origin)
        if not allowed:
            return await self.get_response(request)
        if request.method == "OPTIONS":
            return self._preflight(origin)
        return self._allow(await self.get_response(request), origin)

    def _answer(self, request, origin: str | None):
        if origin is None:
            return self.get_response(request)
        if request.method == "OPTIONS":
            return self._preflight(origin)
        return self._allow(self.get_response(request), origin)

    @staticmethod
    def _preflight(origin: str) -> HttpResponse:
        response = HttpResponse(status=204)
        response["Access-Control-Allow-Methods"] = ALLOWED_METHODS
        response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
        response["Access-Control-Max-Age"] = MAX_AGE_S
        return ClientTokenCorsMiddleware._allow(response, origin)

    @staticmethod
    def _allow(response, origin: str):
        response["Access-Control-Allow-Origin"] = origin
        response["Vary"] = "Origin"
        return response
