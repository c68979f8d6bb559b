"""Input checks at the edge, before any view runs: body size (413), an unreadable multipart body or one with no part
(400), and text neither database can store (NUL characters, lone surrogates) in the path, the query string, form
fields and JSON bodies (422, naming the field); JSON nested too deep (422).

`RequestGuardMiddleware` covers every request (a NUL in a file name is found before Django parses the body, by the
ASGI middleware in agents_ide/upload_names.py); `StrictParser` is the API's JSON parser (it checks the body
it parses, so the API parses each body once). Field lengths, ranges and enums are declared on the API schemas.
"""

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from ninja.parser import Parser

from agents_ide.middleware import SyncAsyncMiddleware
from core.agents.agentfile.model import MAX_FILE_BYTES
from core.errors import Invalid
from core.text import JSONTooDeep, first_bad_string, json_input, text_problem

API_PREFIX = "/v1/"


class TooLarge(Exception):
    """The request body is over the documented limit (MAX_REQUEST_BYTES)."""


def body_limit(request: HttpRequest) -> int:
    """Bytes a request body may have: MAX_REQUEST_BYTES, plus the agent-file limit for multipart uploads."""

    limit = settings.MAX_REQUEST_BYTES
    if request.content_type == "multipart/form-data":
        limit += MAX_FILE_BYTES
    return limit


def too_large_message(request: HttpRequest) -> str:
    return (
        f"The request body is larger than this server accepts ({body_limit(request)} bytes; "
        "MAX_REQUEST_BYTES sets the limit for JSON and form bodies, agent files may be 16 MiB)."
    )


def _query_problem(request: HttpRequest) -> tuple[str, str] | None:
    if problem := text_problem(request.path):
        return "path", problem
    for key, values in request.GET.lists():
        if found := first_bad_string({key: values}):
            return f"query parameter {found[0]}", found[1]
    return None


_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def _form_problem(request: HttpRequest) -> tuple[str, str] | None:
    if request.method != "POST" or request.content_type not in _FORMS:
        return None
    for key, values in request.POST.lists():
        if found := first_bad_string({key: values}):
            return f"form field {found[0]}", found[1]
    for key, upload in request.FILES.items():
        if problem := text_problem(upload.name or ""):
            return f"file name of {key}", problem
    return None


def _empty_multipart(request: HttpRequest) -> bool:
    """A multipart POST to the API holding no part at all (say, only its closing boundary): its multipart routes
    take a file. (A page's form may be posted empty: a button with no fields.)"""
    return (
        request.path.startswith(API_PREFIX)
        and request.method == "POST"
        and request.content_type == "multipart/form-data"
        and not (request.POST or request.FILES)
    )


def _refuse(request: HttpRequest, status: int, message: str, where: str | None = None) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        body = {"detail": message}
        if where:
            body["errors"] = [{"loc": where.split("."), "msg": message}]
        return JsonResponse(body, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def request_problem(request: HttpRequest) -> HttpResponse | None:
    """The response refusing this request (413 or 422), or None if its size and text are acceptable."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > body_limit(request):
        return _refuse(request, 413, too_large_message(request))
    try:
        found = _query_problem(request) or _form_problem(request)
    except (RequestDataTooBig, TooManyFieldsSent):
        return _refuse(request, 413, too_large_message(request))
    except MultiPartParserError as exc:  # Django's own answer is its HTML 400 page, even under /v1/
        return _refuse(request, 400, f"The multipart body cannot be read: {exc}.")
    if _empty_multipart(request):
        return _refuse(request, 400, "The multipart body holds no parts: no form field and no file was sent.")
    if found:
        where, problem = found
        return _refuse(request, 422, f"The {where} contains {problem}, which cannot be stored.", where)
    return None


class RequestGuardMiddleware(SyncAsyncMiddleware):
    """Refuse oversized bodies (413) and unstorable text (422) before a view sees them."""

    def before(self, request):
        return request_problem(request)

    async def ahandle(self, request):
        if request.method == "POST" and request.content_type in _FORMS:  # parsing a form body reads it: a thread
            problem = await sync_to_async(request_problem, thread_sensitive=False)(request)
        else:
            problem = request_problem(request)
        return problem or await self.get_response(request)


def _json_type(content_type: str) -> bool:
    """Whether a body of this media type is read as JSON: no type given, application/json or application/*+json."""
    main, _, sub = content_type.partition("/")
    return not content_type or (main == "application" and (sub == "json" or sub.endswith("+json")))


class StrictParser(Parser):
    """The API's JSON parser: a body sent as another media type (text/plain, a form), nested deeper than
    MAX_JSON_DEPTH, or with NUL characters or lone surrogates in any string, is refused (422)."""

    def parse_body(self, request: HttpRequest):
        try:
            raw = request.body
        except RequestDataTooBig:
            raise TooLarge(too_large_message(request)) from None
        if raw and not _json_type(request.content_type or ""):  # as Letta's FastAPI reads it: then not an object
            message = f"The request body must be JSON (Content-Type: application/json), not {request.content_type}."
            raise Invalid(message, detail=[{"loc": ["body"], "msg": message}])
        try:
            data = json_input(raw)
        except JSONTooDeep as exc:
            raise Invalid(f"The request body is nested deeper than {exc.max_depth} levels.") from None
        if found := first_bad_string(data, "body"):
            where, problem = found
            raise Invalid(
                f"{where} contains {problem}, which cannot be stored.",
                detail=[{"loc": where.replace("[", ".").replace("]", "").split("."), "msg": problem}],
            )
        return data
