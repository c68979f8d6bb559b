from django.contrib import admin
from django.urls import include, path

from agents_ide.api import api

urlpatterns = [
    path("v1/", api.urls),
    path("admin/", admin.site.urls),
    path("", include("core.urls")),
]
