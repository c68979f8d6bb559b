"""{% trace_link run_id %}: a run's trace id, linked to the trace UI when TRACE_UI_URL is set; nothing when traces
are neither sent nor linked."""

from django import template
from django.conf import settings
from django.utils.html import format_html

from core.telemetry import tracing

register = template.Library()


def _ui_url(trace_id: str) -> str:
    url = settings.TRACE_UI_URL
    return url.replace("{trace_id}", trace_id) if "{trace_id}" in url else url + trace_id


@register.simple_tag
def trace_ui_url(run_id: str) -> str:
    """The TRACE_UI_URL page of a run's trace, "" when none is set."""
    trace_id = tracing.trace_id_hex(run_id or "")
    return _ui_url(trace_id) if trace_id and settings.TRACE_UI_URL else ""


@register.simple_tag
def trace_link(run_id: str) -> str:
    """The trace id of a run (the trace of each of its steps too), as a link to TRACE_UI_URL's page for it."""
    trace_id = tracing.trace_id_hex(run_id or "")
    if not trace_id or not (settings.TRACE_UI_URL or tracing.tracer() is not None):
        return ""
    if not settings.TRACE_UI_URL:
        return format_html('<span class="trace-id muted small">trace <code>{}</code></span>', trace_id)
    url = _ui_url(trace_id)
    return format_html(
        '<a class="trace-id small" href="{}" target="_blank" rel="noopener noreferrer" title="Open this trace">'
        "trace <code>{}</code></a>",
        url,
        trace_id,
    )
