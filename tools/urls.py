from django.urls import path

from tools import views

urlpatterns = [
    path("tools/", views.tools_page, name="tools"),
    path("tools/schema/", views.schema_preview, name="tool_schema_preview"),
    path("tools/run/", views.tool_run, name="tool_run"),
    path("tools/run/cancel/", views.tool_run_cancel, name="tool_run_cancel"),
    path("tools/save/", views.tool_save, name="tool_save"),
    path("tools/<str:tool_id>/delete/", views.tool_delete, name="tool_delete"),
    path("tools/<str:tool_id>/attach/", views.tool_attach, name="tool_attach"),
]
