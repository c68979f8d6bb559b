"""The one NinjaAPI: adds each app's router under /v1 and maps domain errors to HTTP in one place."""

from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import APIKeyHeader, HttpBearer, django_auth

from core.accounts import principal_from_token, principal_from_user
from core.errors import DomainError


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        principal = principal_from_token(token)
        if principal:
            request.principal = principal
        return principal


class LettaKeyHeader(APIKeyHeader):
    """Letta's SDK may send the key as `X-API-Key`/`user_id` headers; accept our token there too."""

    param_name = "X-API-Key"

    def authenticate(self, request: HttpRequest, key: str | None):
        principal = principal_from_token(key or "")
        if principal:
            request.principal = principal
        return principal


def session_auth(request: HttpRequest):
    """The browser IDE calls the API with its session (CSRF-checked by django_auth)."""
    user = django_auth(request)
    if not user:
        return None
    request.principal = principal_from_user(user)
    return request.principal


api = NinjaAPI(
    title="Agents IDE API",
    version="1",
    description="Letta v1-compatible REST API for stateful agents. Authenticate with `Authorization: Bearer <token>`.",
    auth=[BearerToken(), LettaKeyHeader(), session_auth],
    urls_namespace="api",
)


@api.exception_handler(DomainError)
def _domain_error(request, exc: DomainError):
    body = {"detail": exc.message}
    if exc.detail is not None:
        body["errors"] = exc.detail
    return api.create_response(request, body, status=exc.status)


@api.exception_handler(AuthenticationError)
def _auth_error(request, exc):
    return api.create_response(request, {"detail": "Authentication required: send `Authorization: Bearer <API token>`."}, status=401)


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    return api.create_response(request, {"detail": "Invalid request", "errors": exc.errors}, status=422)


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.get("/health/", auth=None, tags=["health"])
def health(request):
    return {"status": "ok", "version": "0.1.0"}


def _register_routers() -> None:
    from core.api import router as core_router
    from core.api_messages import router as messages_router
    from core.api_runs import router as runs_router
    from core.api_agentfiles import router as agentfile_router
    from memory.api import router as memory_router
    from tools.api import router as tools_router

    api.add_router("", agentfile_router)  # first: /agents/import must not be taken for /agents/{agent_id}
    api.add_router("", core_router)
    api.add_router("", messages_router)
    api.add_router("", runs_router)
    api.add_router("", memory_router)
    api.add_router("", tools_router)


_register_routers()
