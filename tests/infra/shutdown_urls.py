"""The project's URLs and a view that outlives the server, for tests/infra/test_shutdown.py."""

import time
from pathlib import Path

from django.http import HttpResponse
from django.urls import path

from agents_ide.urls import urlpatterns as project


def stall(request):
    """Says it has started (creates the file named by `started`), then sleeps for `sleep` seconds."""
    Path(request.GET["started"]).touch()
    time.sleep(float(request.GET["sleep"]))
    return HttpResponse("late")


urlpatterns = [path("stall", stall), *project]
