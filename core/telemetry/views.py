"""GET /metrics: Prometheus' scrape endpoint, behind METRICS_TOKEN (a bearer token); without the setting it is
not there at all (404)."""

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from core.telemetry import metrics


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The metrics in Prometheus' text format, for a caller sending `Authorization: Bearer <METRICS_TOKEN>`."""
    token = settings.METRICS_TOKEN
    if not token:
        raise Http404("Metrics are off: set METRICS_TOKEN to serve them.")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        response = HttpResponse(
            "Send the metrics token: Authorization: Bearer <METRICS_TOKEN>.\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)
