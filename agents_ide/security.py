"""Browser-facing defences: the Content-Security-Policy (with a per-request nonce for the few inline scripts the
templates need) and the websocket's origin check (scheme, host and port, as Django's CSRF check does)."""

import secrets
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from agents_ide.middleware import SyncAsyncMiddleware

# The IDE's pages load scripts, styles and fonts from this origin only; inline scripts need the request's nonce.
# Inline style attributes are allowed (templates and htmx use them; they cannot run code).
PAGE_POLICY = (
    "default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
# The API's interactive docs: django-ninja's Swagger UI, its assets served from this origin (works offline);
# its settings travel in a JSON data block, which is never executed. Swagger UI sets inline styles.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'"
)
DOCS_PATH = "/v1/docs"


def csp_nonce(request) -> dict:
    """Template context: `csp_nonce`, for `<script nonce="{{ csp_nonce }}">` (one per request)."""
    return {"csp_nonce": _nonce(request)}


def _nonce(request) -> str:
    if not hasattr(request, "_csp_nonce"):
        request._csp_nonce = secrets.token_urlsafe(18)
    return request._csp_nonce


def _policy(request) -> str:
    if request.path.startswith(DOCS_PATH):
        return DOCS_POLICY
    return PAGE_POLICY.format(nonce=_nonce(request))


class ContentSecurityPolicyMiddleware(SyncAsyncMiddleware):
    """Add the Content-Security-Policy header to every response that does not set its own."""

    def after(self, request, response):
        response.headers.setdefault("Content-Security-Policy", _policy(request))
        return response


def allowed_origins_for(host: str, scheme: str) -> set[str]:
    """Origins a websocket to `host` may come from: the page's own (same scheme, host and port), if the host is
    allowed, plus CSRF_TRUSTED_ORIGINS."""
    origins = {o.rstrip("/").lower() for o in settings.CSRF_TRUSTED_ORIGINS}
    domain, _ = split_domain_port(host)
    if domain and validate_host(domain, settings.ALLOWED_HOSTS):
        origins.add(f"{scheme}://{host}".lower())
    return origins


def _origin_ok(scope) -> bool:
    headers = dict(scope.get("headers") or ())
    origin = headers.get(b"origin", b"").decode("latin1").rstrip("/").lower()
    host = headers.get(b"host", b"").decode("latin1")
    if not origin or not host:
        return False
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or parts.path or parts.query:
        return False
    return origin in allowed_origins_for(host, _page_scheme(scope, headers))


def _page_scheme(scope, headers: dict) -> str:
    """http or https: the scheme of the page that opened the socket (behind a trusted TLS proxy, its header's)."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode("latin1")
        if headers.get(name, b"").decode("latin1").lower() == proxy[1]:
            return "https"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


class FullOriginValidator:
    """Websocket middleware: accept only connections whose Origin is this server's own (scheme, host and port) or
    a trusted origin; Channels' AllowedHostsOriginValidator compares hosts only, so any port passed."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not _origin_ok(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)
