from django.contrib import admin
from django.urls import include, path

from agents_ide.api import api
from core.telemetry.views import metrics_view

handler500 = "agents_ide.busy.server_error"  # a busy database is a 503 with Retry-After, not a 500

urlpatterns = [
    path("v1/", api.urls),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),  # Prometheus (docs/observability.md)
    path("", include("core.urls")),
]
