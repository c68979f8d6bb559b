from django.contrib.auth import views as auth_views
from django.urls import include, path

from core import views
from core.web import agentfiles, agents, inspector, runs, settings_pages, timetravel, workspace

urlpatterns = [
    path("setup/", views.setup, name="setup"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("", agents.agents_page, name="agents"),
    path("agents/new/", agents.agent_create, name="agent_create"),
    path("agents/status/", agents.agents_status, name="agents_status"),
    path("agents/import/", agentfiles.agent_import, name="agent_import"),
    path("agents/<str:agent_id>/", workspace.workspace, name="workspace"),
    path("agents/<str:agent_id>/export/", agentfiles.agent_export, name="agent_export"),
    path("agents/<str:agent_id>/duplicate/", agents.agent_duplicate, name="agent_duplicate"),
    path("agents/<str:agent_id>/delete/", agents.agent_delete, name="agent_delete"),
    path("agents/<str:agent_id>/settings/", workspace.settings_save, name="agent_settings"),
    path("agents/<str:agent_id>/tokens/", workspace.token_count, name="agent_token_count"),
    path("agents/<str:agent_id>/history/", workspace.history_older, name="agent_history"),
    path("agents/<str:agent_id>/window/", runs.window_marks, name="agent_window"),
    path("agents/<str:agent_id>/reset/", workspace.messages_reset, name="agent_reset"),
    path("agents/<str:agent_id>/context/", inspector.context_panel, name="agent_context"),
    path("agents/<str:agent_id>/steps/", runs.steps_list, name="agent_steps"),
    path("agents/<str:agent_id>/steps/<str:step_id>/", inspector.step_detail, name="agent_step"),
    path("agents/<str:agent_id>/steps/<str:step_id>/replay/", timetravel.replay_page, name="agent_replay"),
    path("agents/<str:agent_id>/steps/<str:step_id>/replay/run/", timetravel.replay_run, name="agent_replay_run"),
    path("agents/<str:agent_id>/steps/<str:step_id>/fork/", timetravel.fork_create, name="agent_fork"),
    path("agents/<str:agent_id>/runs/", runs.runs_panel, name="agent_runs"),
    path("agents/<str:agent_id>/runs/<str:run_id>/", runs.run_detail, name="agent_run"),
    path("agents/<str:agent_id>/runs/<str:run_id>/notice/", runs.run_notice, name="agent_run_notice"),
    path("agents/<str:agent_id>/tools/<str:tool_id>/<str:action>/", workspace.tool_attach_toggle, name="agent_tool_toggle"),
    path("agents/<str:agent_id>/rules/", workspace.rules_save, name="agent_rules"),
    path("", include("memory.urls")),
    path("", include("tools.urls")),
    path("settings/", settings_pages.settings_page, name="settings"),
    path("settings/tokens/", views.token_create, name="token_create"),
    path("settings/tokens/<str:token_id>/revoke/", views.token_revoke, name="token_revoke"),
    path("settings/providers/", settings_pages.provider_save, name="provider_save"),
    path("settings/providers/<str:provider_id>/delete/", settings_pages.provider_delete, name="provider_delete"),
    path("settings/owner/", settings_pages.owner_settings_save, name="owner_settings_save"),
]
