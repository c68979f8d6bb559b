"""Settings: LLM providers (keys write-only), embedding model, sandbox default / E2B key, API tokens."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from core import accounts, providers
from core.errors import NotConfigured
from core.models import BASE_URL_MAX, OwnerSettings, ProviderConfig
from core.web.common import org
from core.web.forms import TokenForm


class ProviderForm(forms.Form):
    kind = forms.ChoiceField(choices=ProviderConfig.KINDS)
    name = forms.SlugField(max_length=64, help_text="Prefix of model handles, e.g. 'openai' → openai/gpt-4o-mini")
    base_url = forms.URLField(required=False, assume_scheme="https", max_length=BASE_URL_MAX, label="Base URL")
    api_key = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False), label="API key")
    model_names = forms.CharField(required=False, help_text="comma-separated; empty = ask the server / defaults")
    save_anyway = forms.BooleanField(required=False)  # offered once the URL check failed: the server may be down now


class OwnerSettingsForm(forms.Form):
    embedding_model = forms.CharField(required=False, max_length=200)
    sandbox_default = forms.ChoiceField(
        choices=[("", "deployment default"), ("local", "local"), ("e2b", "E2B")], required=False
    )
    sandbox_allow_network = forms.ChoiceField(
        choices=[("", "deployment default"), ("on", "allowed"), ("off", "not allowed")], required=False
    )
    e2b_api_key = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False))
    e2b_template = forms.CharField(required=False, max_length=200)


@login_required
def settings_page(
    request,
    new_token: str | None = None,
    form: TokenForm | None = None,
    provider_form: ProviderForm | None = None,
    owner_form: OwnerSettingsForm | None = None,
    unreachable: bool = False,
    status: int = 200,
):
    owner = org(request)
    current = OwnerSettings.objects.filter(owner=owner).first()
    owner_form = owner_form or OwnerSettingsForm(
        initial={
            "embedding_model": current.embedding_model if current else "",
            "sandbox_default": current.sandbox_default if current else "",
            "sandbox_allow_network": {None: "", True: "on", False: "off"}[
                current.sandbox_allow_network if current else None
            ],
            "e2b_template": current.e2b_template if current else "",
        }
    )
    return TemplateResponse(
        request,
        "core/settings.html",
        {
            "tokens": accounts.tokens_for_user(request.user),
            "new_token": new_token,
            "form": form or TokenForm(),
            "providers": providers.providers_list(owner=owner),
            "provider_rows": ProviderConfig.objects.filter(owner=owner),
            "provider_form": provider_form or ProviderForm(),
            "unreachable": unreachable,
            "owner_form": owner_form,
            "e2b_key_set": bool(current and current.e2b_api_key),
            "nav": "settings",
        },
        status=status,
    )


@login_required
@require_POST
def provider_save(request):
    """Add or replace a provider; an empty key field keeps the stored key (keys are never shown again). A base URL
    is asked for its models first (a few seconds at most): one that does not answer is saved only when the person
    ticks "save anyway" (a server may be down for now), and the page then says so."""
    form = ProviderForm(request.POST)
    if not form.is_valid():
        return settings_page(request, provider_form=form, status=400)
    owner, data = org(request), form.cleaned_data
    row = ProviderConfig.objects.filter(owner=owner, name=data["name"]).first() or ProviderConfig(
        owner=owner, name=data["name"]
    )
    problem = None
    if data["base_url"]:
        try:
            providers.base_url_check(data["base_url"])
        except NotConfigured as exc:
            form.add_error("base_url", exc.message)
            return settings_page(request, provider_form=form, status=400)
        key = data["api_key"] or (row.api_key if row.pk else "")
        problem = providers.provider_reach_check(kind=data["kind"], base_url=data["base_url"], api_key=key)
        if problem and not data["save_anyway"]:
            form.add_error("base_url", problem)
            return settings_page(request, provider_form=form, unreachable=True, status=400)
    row.kind, row.base_url = data["kind"], data["base_url"]
    row.model_names = [m.strip() for m in data["model_names"].split(",") if m.strip()]
    if data["api_key"]:
        row.api_key = data["api_key"]
    row.save()
    if problem:
        messages.warning(request, f"Saved {row.name}, but it cannot be used yet. {problem}")
    else:
        messages.success(request, f"Saved {row.name}." + (" Its server answered." if data["base_url"] else ""))
    return redirect(reverse("settings") + "#providers")


@login_required
@require_POST
def provider_delete(request, provider_id: str):
    ProviderConfig.objects.filter(owner=org(request), id=provider_id).delete()
    return redirect("settings")


@login_required
@require_POST
def owner_settings_save(request):
    form = OwnerSettingsForm(request.POST)
    if not form.is_valid():
        return settings_page(request, owner_form=form, status=400)
    row, _ = OwnerSettings.objects.get_or_create(owner=org(request))
    data = form.cleaned_data
    row.embedding_model, row.sandbox_default, row.e2b_template = (
        data["embedding_model"],
        data["sandbox_default"],
        data["e2b_template"],
    )
    row.sandbox_allow_network = {"": None, "on": True, "off": False}[data["sandbox_allow_network"]]
    if data["e2b_api_key"]:
        row.e2b_api_key = data["e2b_api_key"]
    if request.POST.get("clear_e2b_key"):
        row.e2b_api_key = ""
    row.save()
    return redirect("settings")
