"""Sends every page to the first-account form until an account exists."""

from django.shortcuts import redirect
from django.urls import reverse

from core.accounts import first_run_pending

_EXEMPT_PREFIXES = ("/static/", "/v1/", "/setup/", "/healthz")


class FirstRunMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(_EXEMPT_PREFIXES) and first_run_pending():
            return redirect(reverse("setup"))
        return self.get_response(request)
