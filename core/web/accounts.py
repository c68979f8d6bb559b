"""Pages of the core app: first account, API tokens (the IDE pages live in core/web/). Thin: read, render."""

from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core import accounts
from core.errors import Conflict, Invalid
from core.web.forms import FirstAccountForm, LoginForm, TokenForm
from core.web.settings_pages import settings_page as full_page


class LoginView(auth_views.LoginView):
    """Django's login view with throttling (core/throttle.py): a throttled attempt answers 429."""

    template_name = "core/login.html"
    authentication_form = LoginForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
        return response


def healthz(request):
    return HttpResponse("ok", content_type="text/plain")


def setup(request):
    """The first visit of a fresh install: create the first account (it becomes the administrator); a server others
    may reach asks for the setup token it printed on its console."""
    if not accounts.first_run_pending():
        return redirect("agents")
    local = request.META.get("SERVER_NAME", "")  # the address the request arrived at (ASGI: the server's socket)
    needs_token = accounts.setup_token_required(local_address=local)
    if needs_token and request.method == "GET":
        accounts.setup_token_announce(local_address=local)
    form = FirstAccountForm(request.POST or None, setup_token=needs_token)
    if request.method == "POST" and form.is_valid():
        try:
            user = accounts.first_account_create(
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
                email=form.cleaned_data.get("email") or "",
                setup_token=form.cleaned_data.get("setup_token", ""),
                local_address=local,
            )
        except Invalid as exc:
            form.add_error("setup_token" if needs_token else None, exc.message)
        except Conflict:
            return redirect("agents")
        else:
            login(request, user)
            return redirect("agents")
    return TemplateResponse(request, "core/setup.html", {"form": form}, status=400 if form.is_bound else 200)


@login_required
def settings_page(request, new_token: str | None = None, form: TokenForm | None = None, status: int = 200):
    return full_page(request, new_token=new_token, form=form, status=status)


@login_required
def token_create(request):
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    form = TokenForm(request.POST)
    if not form.is_valid():
        return settings_page(request, form=form, status=400)
    _, raw = accounts.api_token_create(user=request.user, name=form.cleaned_data["name"])
    return settings_page(request, new_token=raw)


@login_required
@require_POST
def token_revoke(request, token_id: str):
    accounts.api_token_revoke(user=request.user, token_id=token_id)
    return redirect("settings")
