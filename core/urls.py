from django.contrib.auth import views as auth_views
from django.urls import path

from core import views

urlpatterns = [
    path("setup/", views.setup, name="setup"),
    path("login/", auth_views.LoginView.as_view(template_name="core/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("", views.agents_page, name="agents"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/tokens/", views.token_create, name="token_create"),
    path("settings/tokens/<str:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]
