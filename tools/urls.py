from django.urls import path

from tools import views

urlpatterns = [
    path("tools/", views.tools_page, name="tools"),
    path("tools/schema/", views.schema_preview, name="tool_schema_preview"),
    path("tools/run/", views.tool_run, name="tool_run"),
    path("tools/run/cancel/", views.tool_run_cancel, name="tool_run_cancel"),
    path("tools/run/output/", views.tool_run_output, name="tool_run_output"),
    path("tools/save/", views.tool_save, name="tool_save"),
    path("tools/<str:tool_id>/run/", views.tool_run_saved, name="tool_run_saved"),
    path("tools/<str:tool_id>/delete/", views.tool_delete, name="tool_delete"),
    path("tools/<str:tool_id>/attach/", views.tool_attach, name="tool_attach"),
]

from tools import mcp_views  # noqa: E402

urlpatterns += [
    path("mcp-servers/", mcp_views.mcp_page, name="mcp_servers"),
    path("mcp-servers/new/", mcp_views.mcp_server_save, name="mcp_server_save"),
    path("mcp-servers/starting/", mcp_views.mcp_servers_starting, name="mcp_servers_starting"),
    path("mcp-servers/<str:server_id>/delete/", mcp_views.mcp_server_delete, name="mcp_server_delete"),
    path("mcp-servers/<str:server_id>/refresh/", mcp_views.mcp_server_refresh, name="mcp_server_refresh"),
    path("mcp-servers/<str:server_id>/tools/<str:tool_id>/run/", mcp_views.mcp_tool_run, name="mcp_tool_run"),
]
