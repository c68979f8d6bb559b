"""Letta's v1 routes that its own clients call, so each one this server does not serve answers a JSON 404 naming
it ("… is not supported by this server") instead of "no such route" or a 405: a client sees at once that the
feature is missing here, not that it called a wrong URL.

The routes are those the Python SDK (letta-client 1.12.1) and Letta Code (0.25.9, its direct `apiRequest` calls)
call. Which are served is read from the routers when they are registered, so a route built later stops answering
404 without a change here.
"""

import inspect
import re

from django.http import HttpRequest
from ninja import Router

from core.errors import NotFound

# path (under /v1, `{}` for each parameter): methods
LETTA_ROUTES = """
/_internal_search/cache-warm: POST
/agents/: GET POST
/agents/import: POST
/agents/{}: GET PATCH DELETE
/agents/{}/archival-memory: GET POST
/agents/{}/archival-memory/search: GET
/agents/{}/archival-memory/{}: DELETE
/agents/{}/archives/attach/{}: PATCH
/agents/{}/archives/detach/{}: PATCH
/agents/{}/context: GET
/agents/{}/core-memory/blocks: GET
/agents/{}/core-memory/blocks/attach/{}: PATCH
/agents/{}/core-memory/blocks/detach/{}: PATCH
/agents/{}/core-memory/blocks/{}: GET PATCH
/agents/{}/export: GET
/agents/{}/files: GET
/agents/{}/files/close-all: PATCH
/agents/{}/files/{}/close: PATCH
/agents/{}/files/{}/open: PATCH
/agents/{}/folders: GET
/agents/{}/folders/attach/{}: PATCH
/agents/{}/folders/detach/{}: PATCH
/agents/{}/identities/attach/{}: PATCH
/agents/{}/identities/detach/{}: PATCH
/agents/{}/messages: GET POST
/agents/{}/messages/async: POST
/agents/{}/messages/cancel: POST
/agents/{}/messages/stream: POST
/agents/{}/recompile: POST
/agents/{}/reset-messages: PATCH
/agents/{}/schedule: GET POST
/agents/{}/schedule/{}: GET DELETE
/agents/{}/summarize: POST
/agents/{}/tools: GET
/agents/{}/tools/approval/{}: PATCH
/agents/{}/tools/attach/{}: PATCH
/agents/{}/tools/detach/{}: PATCH
/agents/{}/tools/{}/run: POST
/archives/: GET POST
/archives/{}: GET PATCH DELETE
/archives/{}/passages: POST
/archives/{}/passages/batch: POST
/archives/{}/passages/{}: DELETE
/blocks/: GET POST
/blocks/{}: GET PATCH DELETE
/blocks/{}/agents: GET
/client-side-access-tokens: GET POST
/client-side-access-tokens/{}: DELETE
/conversations/: GET POST
/conversations/{}: GET PATCH DELETE
/conversations/{}/cancel: POST
/conversations/{}/compact: POST
/conversations/{}/fork: POST
/conversations/{}/messages: GET POST
/conversations/{}/recompile: POST
/conversations/{}/stream: POST
/environments: GET
/environments/{}: GET
/environments/{}/messages: POST
/folders/: GET POST
/folders/{}: GET PATCH DELETE
/folders/{}/agents: GET
/folders/{}/files: GET
/folders/{}/files/{}: GET
/folders/{}/upload: POST
/folders/{}/{}: DELETE
/mcp-servers/: GET POST
/mcp-servers/{}: GET PATCH DELETE
/mcp-servers/{}/refresh: PATCH
/mcp-servers/{}/tools: GET
/mcp-servers/{}/tools/{}: GET
/mcp-servers/{}/tools/{}/run: POST
/messages/: GET
/messages/search: POST
/messages/{}: GET
/metadata/balance: GET
/models/: GET
/models/embedding: GET
/passages/search: POST
/providers: GET POST
/providers/check: POST
/providers/{}: PATCH DELETE
/providers/{}/refresh: PATCH
/runs/: GET
/runs/{}: GET
/runs/{}/messages: GET
/runs/{}/steps: GET
/runs/{}/stream: POST
/runs/{}/trace: GET
/runs/{}/usage: GET
/steps/: GET
/steps/{}: GET
/steps/{}/feedback: PATCH
/steps/{}/messages: GET
/steps/{}/metrics: GET
/steps/{}/trace: GET
/tags/: GET
/templates: POST
/templates/{}: PATCH DELETE
/templates/{}/agents: POST
/templates/{}/rollback: POST
/templates/{}/save: POST
/tools/: GET POST PUT
/tools/add-base-tools: POST
/tools/search: POST
/tools/{}: GET PATCH DELETE
"""

_PARAM = re.compile(r"\{[^}]*\}")


def letta_routes() -> list[tuple[str, str]]:
    """(method, path) of every Letta route listed above."""
    out = []
    for line in LETTA_ROUTES.strip().splitlines():
        path, _, methods = line.partition(": ")
        out.extend((method, path) for method in methods.split())
    return out


def _shape(path: str) -> str:
    return _PARAM.sub("{}", path)


def _named(path: str) -> str:
    """The path with its parameters named p0, p1, …"""
    count = iter(range(len(path)))
    return _PARAM.sub(lambda _match: f"{{p{next(count)}}}", path)


def _unsupported_view(method: str, path: str, params: list[str]):
    """A view answering the 404 for one route; it takes the path's parameters (by its router's names) and ignores
    them."""
    message = f"{method} /v1{path} is not supported by this server"

    def unsupported(request: HttpRequest, **_params):
        raise NotFound(message)

    unsupported.__signature__ = inspect.Signature(
        [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=HttpRequest)]
        + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str) for name in params]
    )
    return unsupported


def unsupported_routes_add(routers: list[Router], fallback: Router) -> list[tuple[str, str]]:
    """Give every Letta route no router serves a 404 view: on the router already serving its path with other
    methods (Django matches that router's pattern first), else on `fallback`, which must be registered last.
    Returns the routes given one. Call before the API's URLs are built."""
    served: dict[str, tuple[Router, str, set[str]]] = {}
    for router in routers:
        for path, view in router.path_operations.items():
            methods = {m for operation in view.operations for m in operation.methods}
            router_of, own_path, known = served.setdefault(_shape(path), (router, path, set()))
            if router_of is router and own_path == path:
                known.update(methods)
    added = []
    for method, path in letta_routes():
        router, own_path, known = served.get(_shape(path), (fallback, path, set()))
        if method in known:
            continue
        if router is fallback:
            own_path = _named(path)
        params = [p.strip("{}") for p in _PARAM.findall(own_path)]
        router.add_api_operation(own_path, [method], _unsupported_view(method, path, params), include_in_schema=False)
        added.append((method, path))
    return added
