"""Sends every page to the first-account form until an account exists.

Sync and async capable: a sync-only middleware would make Django hop every request (API calls included)
through its single sync thread and back, serializing concurrent requests there.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.shortcuts import redirect
from django.urls import reverse

from core.accounts import first_run_pending

_EXEMPT_PREFIXES = ("/static/", "/v1/", "/setup/", "/healthz")


class FirstRunMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.async_mode:
            return self.__acall__(request)
        if not request.path.startswith(_EXEMPT_PREFIXES) and first_run_pending():
            return redirect(reverse("setup"))
        return self.get_response(request)

    async def __acall__(self, request):
        if not request.path.startswith(_EXEMPT_PREFIXES) and await sync_to_async(first_run_pending)():
            return redirect(reverse("setup"))
        return await self.get_response(request)


class VersionAuthorMiddleware:
    """Lets core.versions name who changed an agent: the request's API token or signed-in user."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        from core.versions import serving

        if self.async_mode:
            return self.__acall__(request)
        with serving(request):
            return self.get_response(request)

    async def __acall__(self, request):
        from core.versions import serving

        with serving(request):
            return await self.get_response(request)
