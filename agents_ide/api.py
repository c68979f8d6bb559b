"""The one NinjaAPI: adds each app's router under /v1 and maps domain errors to HTTP in one place."""

import json
import logging
import sqlite3

from django.core.exceptions import RequestDataTooBig
from django.db import DataError, IntegrityError, OperationalError
from django.http import HttpRequest
from ninja import NinjaAPI, Router
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import APIKeyHeader, HttpBearer, django_auth

from agents_ide.busy import busy_response
from agents_ide.letta_routes import unsupported_routes_add
from agents_ide.openapi import add_error_responses
from agents_ide.validation import StrictParser, TooLarge, too_large_message
from core.accounts import client_token_check, principal_from_token, principal_from_user
from core.api.access_tokens import router as access_tokens_router
from core.api.agent_tests import router as agent_tests_router
from core.api.agentfiles import router as agentfile_router
from core.api.agents import router as core_router
from core.api.breakpoints import router as breakpoints_router
from core.api.chat import PATH_PREFIX as OPENAI_PATHS
from core.api.chat import openai_error
from core.api.chat import router as chat_router
from core.api.conversations import router as conversations_router
from core.api.evals import router as evals_router
from core.api.folders import router as folders_router
from core.api.identities import router as identities_router
from core.api.messages import router as messages_router
from core.api.runs import router as runs_router
from core.api.schedules import router as schedules_router
from core.api.schemas import HealthOut
from core.api.search import router as search_router
from core.api.sleeptime import router as sleeptime_router
from core.api.step_details import router as step_details_router
from core.api.steps import router as steps_router
from core.api.tags import router as tags_router
from core.api.timetravel import router as timetravel_router
from core.api.versions import router as versions_router
from core.errors import Busy, DomainError
from memory.api import router as memory_router
from memory.archives_api import router as archives_router
from tools.api import router as tools_router
from tools.mcp_api import router as mcp_router

log = logging.getLogger(__name__)


def _token_principal(request: HttpRequest, raw: str):
    """The token's principal (a client-side token's only for what its policy grants: else 403), or None."""
    principal = principal_from_token(raw)
    if principal:
        client_token_check(
            principal=principal, method=request.method, path=request.path, origin=request.headers.get("Origin")
        )
        request.principal = principal
    return principal


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        return _token_principal(request, token)


class LettaKeyHeader(APIKeyHeader):
    """Letta's SDK may send the key as `X-API-Key`/`user_id` headers; accept our token there too."""

    param_name = "X-API-Key"

    def authenticate(self, request: HttpRequest, key: str | None):
        return _token_principal(request, key or "")


def session_auth(request: HttpRequest):
    """The browser IDE calls the API with its session (CSRF-checked by django_auth). A request that sent a token
    (valid or not) or has no logged-in session is not a session call: it gets a 401, not a CSRF failure."""
    if "HTTP_AUTHORIZATION" in request.META or "HTTP_X_API_KEY" in request.META:
        return None
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return None
    user = django_auth(request)
    if not user:
        return None
    request.principal = principal_from_user(user)
    return request.principal


class AgentsAPI(NinjaAPI):
    def get_openapi_operation_id(self, operation) -> str:
        """Ninja's id (module + function), except that core/api/agents.py's endpoints keep the ids they had as
        core/api.py, so generated clients do not see them renamed."""
        module = operation.view_func.__module__
        module = "core.api" if module == "core.api.agents" else module
        return f"{module}_{operation.view_func.__name__}".replace(".", "_")

    def get_openapi_schema(self, **kwargs):
        """Ninja's schema plus the error responses and the Error body every operation may answer with."""
        return add_error_responses(super().get_openapi_schema(**kwargs))


api = AgentsAPI(
    title="Agents IDE API",
    parser=StrictParser(),
    version="1",
    description="Letta v1-compatible REST API for stateful agents. Authenticate with `Authorization: Bearer <token>`.",
    auth=[BearerToken(), LettaKeyHeader(), session_auth],
    urls_namespace="api",
)


def _error(request, body: dict, status: int):
    """An error answer: `{"detail": …}`, or OpenAI's error shape on the OpenAI-compatible routes (its clients read
    only that)."""
    if request.path.startswith(OPENAI_PATHS):
        message = body["detail"] + (f" {json.dumps(body['errors'], default=str)}" if body.get("errors") else "")
        body = openai_error(message, status)
    return api.create_response(request, body, status=status)


@api.exception_handler(DomainError)
def _domain_error(request, exc: DomainError):
    body = {"detail": exc.message}
    if isinstance(exc, Busy):  # Letta's ConversationBusyError body (letta/server/rest_api/app.py)
        body["run_id"] = exc.run_id
    if exc.detail is not None:
        body["errors"] = exc.detail
    return _error(request, body, exc.status)


@api.exception_handler(AuthenticationError)
def _auth_error(request, exc):
    return _error(request, {"detail": "Authentication required: send `Authorization: Bearer <API token>`."}, 401)


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    return _error(request, {"detail": "Invalid request", "errors": exc.errors}, 422)


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    cause = exc.__cause__  # ninja wraps whatever the body parser raised in a 400
    if isinstance(cause, DomainError):
        return _domain_error(request, cause)
    if isinstance(cause, TooLarge):
        return _too_large(request, cause)
    if isinstance(cause, json.JSONDecodeError):
        return _error(
            request,
            {"detail": f"The request body is not valid JSON: {cause.msg} (line {cause.lineno}, column {cause.colno})."},
            400,
        )
    return _error(request, {"detail": str(exc)}, exc.status_code)


@api.exception_handler(TooLarge)
@api.exception_handler(RequestDataTooBig)
def _too_large(request, exc):
    return _error(request, {"detail": too_large_message(request)}, 413)


@api.exception_handler(IntegrityError)
def _integrity_error(request, exc: IntegrityError):
    """A constraint the services did not check first (e.g. a concurrent duplicate): the client's conflict."""
    log.warning("integrity error answered 409 on %s: %s", request.path, exc)
    return _error(
        request,
        {
            "detail": "The change conflicts with existing data (a name or label that "
            "must be unique is already taken, or a referenced item is gone)."
        },
        409,
    )


@api.exception_handler(DataError)
@api.exception_handler(OverflowError)
def _data_error(request, exc):
    """A value the database cannot hold (too long, out of range) that slipped past the schemas."""
    log.warning("data error answered 422 on %s: %s", request.path, exc)
    return _error(request, {"detail": "A value is too long or out of range for what the server stores."}, 422)


@api.exception_handler(OperationalError)
@api.exception_handler(sqlite3.OperationalError)
def _busy(request, exc):
    """The database said "not now" (locked, a lock or statement timeout, no connection to lend): 503, Retry-After."""
    return busy_response(request, exc)


@api.get("/health/", auth=None, tags=["health"], response=HealthOut)
def health(request):
    return {"status": "ok", "version": "0.1.0"}


# Letta answers without the slash too (routers/v1/health.py behind FastAPI): a probe must not get a redirect.
api.get("/health", auth=None, tags=["health"], response=HealthOut, include_in_schema=False)(health)


def _register_routers() -> None:
    routers = [
        agentfile_router,  # first: /agents/import must not be taken for /agents/{agent_id}
        core_router,
        search_router,  # before messages: /messages/search must not be taken for /messages/{message_id}
        messages_router,
        conversations_router,
        runs_router,
        breakpoints_router,
        steps_router,
        step_details_router,
        tags_router,
        timetravel_router,
        agent_tests_router,
        evals_router,
        versions_router,
        memory_router,
        folders_router,
        tools_router,
        mcp_router,
        sleeptime_router,
        chat_router,
        identities_router,
        archives_router,
        access_tokens_router,
        schedules_router,
    ]
    for router in routers:
        api.add_router("", router)
    unsupported = Router(tags=["unsupported"])  # last: its parameter-only paths must not take a served route's URL
    unsupported_routes_add([api.default_router, *routers], unsupported)
    api.add_router("", unsupported)


_register_routers()
