"""Sends every page to the first-account form until an account exists; names the author of agent versions."""

from asgiref.sync import sync_to_async
from django.shortcuts import redirect
from django.urls import reverse

from agents_ide.middleware import SyncAsyncMiddleware
from core.accounts import first_run_pending
from core.agents.versions import serving

_EXEMPT_PREFIXES = ("/static/", "/v1/", "/setup/", "/healthz", "/metrics")


class FirstRunMiddleware(SyncAsyncMiddleware):
    def before(self, request):
        if not request.path.startswith(_EXEMPT_PREFIXES) and first_run_pending():
            return redirect(reverse("setup"))
        return None

    async def ahandle(self, request):  # the check reads the database: off the event loop
        if not request.path.startswith(_EXEMPT_PREFIXES) and await sync_to_async(first_run_pending)():
            return redirect(reverse("setup"))
        return await self.get_response(request)


class VersionAuthorMiddleware(SyncAsyncMiddleware):
    """Lets core.agents.versions name who changed an agent: the request's API token or signed-in user (a context
    variable, so it reaches the view's thread in an async stack too)."""

    def handle(self, request):
        with serving(request):
            return self.get_response(request)

    async def ahandle(self, request):
        with serving(request):
            return await self.get_response(request)
