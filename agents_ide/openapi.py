"""The error half of the OpenAPI spec: which 4xx each operation may answer, all with one `Error` body.

Errors are mapped in one place (agents_ide/api.py); this declares the same statuses, so a client (or
schemathesis) can tell a refusal from a contradiction of the spec.
"""

from core.api.chat import PATH_PREFIX as OPENAI_PATHS
from core.api.chat import OpenAIErrorOut
from core.api.schemas import ErrorOut

ERROR_SCHEMA = {**ErrorOut.model_json_schema(), "title": "Error"}
_REF = {"$ref": "#/components/schemas/Error"}
# The OpenAI-compatible routes answer every error in OpenAI's shape, which OpenAI's clients read.
OPENAI_ERROR_SCHEMA = {
    **OpenAIErrorOut.model_json_schema(ref_template="#/components/schemas/{model}"),
    "title": "OpenAIError",
}
OPENAI_ERROR_DEFS = OPENAI_ERROR_SCHEMA.pop("$defs", {})
_OPENAI_REF = {"$ref": "#/components/schemas/OpenAIError"}
_WRITES = {"post", "put", "patch", "delete"}
_WHY = {
    400: "Malformed request (the body is not JSON), or the deployment lacks what it needs (e.g. no model provider).",
    401: "Authentication required: send `Authorization: Bearer <API token>`.",
    403: "Built-in tools cannot be modified or deleted.",
    404: "Not found (another owner's ids answer 404 too, and so does a list's unknown `after`/`before` cursor).",
    409: "Conflict with the current state (a name or label already taken, the agent is busy).",
    413: "The request body is over the limit (MAX_REQUEST_BYTES; agent files 16 MiB).",
    502: "The agent's run failed (the OpenAI-compatible routes).",
    422: "A field is invalid: wrong type, out of range, too long, not one of the allowed values, or text with "
    "NUL characters or lone surrogates.",
}
# A path whose parameter takes a value that spells another route (a tool named "attach" in
# /agents/{id}/tools/{name}/run) reaches that route, which may not take this method: Django answers 405, bare.
_NOT_ALLOWED = {
    "description": "The path, with these parameter values, names another operation that does not take this method."
}


def _has_cursor(operation: dict) -> bool:
    """Whether a list takes `after`/`before`, whose unknown ids answer 404 (core.pagination)."""
    return any(p.get("in") == "query" and p.get("name") in ("after", "before") for p in operation.get("parameters", ()))


def _statuses(path: str, method: str, operation: dict) -> list[int]:
    codes = [400, 422]
    if operation.get("security"):
        codes.append(401)
    if "{" in path or method in _WRITES or _has_cursor(operation):
        codes.append(404)
    if method in _WRITES:
        codes.append(409)
    if "requestBody" in operation:
        codes.append(413)
    if path.startswith("/v1/tools/") and method in _WRITES:
        codes.append(403)
    return sorted(codes)


def add_error_responses(schema: dict) -> dict:
    """Declare each operation's error responses (in place) and return the schema."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            openai = path.startswith(OPENAI_PATHS)
            if openai:
                components.update({"OpenAIError": OPENAI_ERROR_SCHEMA, **OPENAI_ERROR_DEFS})
            for code in _statuses(path, method, operation) + ([502] if openai else []):
                ref = _OPENAI_REF if openai else _REF
                operation["responses"].setdefault(
                    code, {"description": _WHY[code], "content": {"application/json": {"schema": ref}}}
                )
            if "{" in path:
                operation["responses"].setdefault(405, _NOT_ALLOWED)
    return schema
