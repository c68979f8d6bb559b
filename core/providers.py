"""LLM providers: what is configured (environment, litellm conventions, plus per-owner settings) and how a
model handle resolves to a call. Real provider keys never leave the server process, and a key goes only where its
owner sent it: the environment's keys to the environment's providers, an owner's key (or none) to that owner's."""

import hashlib
import json
import os
import threading
import time
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from core.egress import EgressRefused, Unresolvable, check_url, guarded_client
from core.engine.tokens import model_info
from core.errors import NotConfigured
from core.llm.client import NO_KEY
from core.llm.errors import not_reachable
from core.models import Organization, ProviderConfig

# Curated handles offered when a provider is configured; any other litellm handle works too.
_KNOWN = {
    "openai": ["gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o4-mini"],
    "anthropic": ["claude-3-5-haiku-latest", "claude-sonnet-4-20250514", "claude-3-7-sonnet-latest"],
    "deepseek": ["deepseek-chat", "deepseek-reasoner"],
}
_ENV = {  # provider -> (key env var, base URL env var)
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "deepseek": ("DEEPSEEK_API_KEY", "DEEPSEEK_API_BASE"),
    "ollama": ("OLLAMA_API_KEY", "OLLAMA_API_BASE"),
}
# Where an owner's provider with no base URL goes: its service's public address, never the environment's base URL
# (litellm's fallback), so an owner's key is not sent to a server the operator set up for the deployment's providers.
_PUBLIC_BASE = {
    "openai": "https://api.openai.com/v1",
    "openai_compatible": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
# Ollama has no public service: its default is this host's, which the egress guard checks like any owner's URL.
_OLLAMA_LOCAL = "http://localhost:11434"
CONFIGURE_HINT = (
    "No LLM provider is configured. Set OPENAI_API_KEY (and OPENAI_BASE_URL for any OpenAI-compatible "
    "server), ANTHROPIC_API_KEY or OLLAMA_API_BASE in the environment, or add a provider on the "
    "Settings page."
)


@dataclass(frozen=True)
class Provider:
    name: str
    kind: str  # openai | anthropic | deepseek | ollama | openai_compatible
    api_key: str = field(repr=False)  # not in its repr (a log line, an error report)
    base_url: str
    models: tuple[str, ...] = ()
    source: str = "environment"


@dataclass(frozen=True)
class ResolvedModel:
    """Everything the engine needs to call a model: the litellm model string and where to reach it."""

    handle: str
    litellm_model: str
    api_base: str | None  # None: the deployment's provider at litellm's default (its environment's) address
    api_key: str = field(repr=False)  # the provider's own key, or NO_KEY
    provider: str
    guarded: bool = False  # an owner's provider: its calls connect only through the egress guard (core.egress)


def _env_providers() -> list[Provider]:
    found = []
    for kind, (key_var, base_var) in _ENV.items():
        key, base = os.environ.get(key_var, ""), os.environ.get(base_var, "")
        if base if kind == "ollama" else key:  # a local Ollama needs no key; a hosted one may have one
            found.append(Provider(name=kind, kind=kind, api_key=key, base_url=base))
    return found


def _column(name: str) -> str:
    return f'"{ProviderConfig._meta.get_field(name).column}"'


_OWNER_COLUMNS = ("name", "kind", "api_key", "base_url", "model_names")
_OWNER_PROVIDERS_SQL = (
    f'SELECT {", ".join(_column(c) for c in _OWNER_COLUMNS)} FROM "{ProviderConfig._meta.db_table}" '
    f"WHERE {_column('owner')} = %s ORDER BY {_column('created_at')}, {_column('id')}"
)
# An owner's providers as last built, keyed by the columns as stored: a send reads them (one statement, no model
# instances) and builds them again only when a stored value changed (a key is stored encrypted anew at each save, so
# an edit in Settings, a new or a deleted provider is seen at the next send). Most recently used owners kept.
_OWNER_CACHE_SIZE = 256
_owner_providers: OrderedDict[str, tuple[tuple, tuple[Provider, ...]]] = OrderedDict()
_owner_lock = threading.Lock()


def _owner_rows(owner_id: str) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(_OWNER_PROVIDERS_SQL, [owner_id])
        return tuple(tuple(row) for row in cursor.fetchall())


def _owner_build(stored: tuple) -> tuple[Provider, ...]:
    fields = [ProviderConfig._meta.get_field(c) for c in _OWNER_COLUMNS]
    built = []
    for row in stored:
        name, kind, api_key, base_url, model_names = (
            f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
            for f, v in zip(fields, row, strict=True)
        )
        built.append(
            Provider(
                name=name,
                kind=kind,
                api_key=api_key,
                base_url=base_url,
                models=tuple(model_names or ()),
                source="settings",
            )
        )
    return tuple(built)


def owner_providers(owner_id: str) -> tuple[Provider, ...]:
    """The providers an owner configured in Settings, oldest first: read on every send, built when they changed."""
    stored = _owner_rows(owner_id)
    with _owner_lock:
        cached = _owner_providers.get(owner_id)
        if cached is not None and cached[0] == stored:
            _owner_providers.move_to_end(owner_id)
            return cached[1]
    built = _owner_build(stored)
    with _owner_lock:
        _owner_providers[owner_id] = (stored, built)
        _owner_providers.move_to_end(owner_id)
        while len(_owner_providers) > _OWNER_CACHE_SIZE:
            _owner_providers.popitem(last=False)
    return built


def providers_list(*, owner: Organization | None) -> list[Provider]:
    """Configured providers: the environment's, then the owner's own (which take precedence by name)."""
    providers = {p.name: p for p in _env_providers()}
    if owner is not None:
        providers.update((p.name, p) for p in owner_providers(owner.pk))
    return list(providers.values())


# Keyed by who configured the provider, its URL and (a hash of) its key: a listing got with one owner's
# credentials is never shown to another owner, nor to the same URL with another key.
_listing_cache: dict[tuple[str, str, str], tuple[float, list[str]]] = {}


def _listing_key(owner_id: str, base_url: str, api_key: str) -> tuple[str, str, str]:
    return owner_id, base_url, hashlib.sha256(api_key.encode()).hexdigest()


def _listed_models(base_url: str, api_key: str, *, owner_id: str = "") -> list[str]:
    """Ask an OpenAI-compatible server which models it serves (cached a minute per owner and key; 1.5 s timeout).
    An owner's server is asked through the egress guard (`owner_id` set): never this host's or its network's."""
    key = _listing_key(owner_id, base_url, api_key)
    cached = _listing_cache.get(key)
    if cached and time.monotonic() - cached[0] < 60:
        return cached[1]
    names: list[str] = []
    from httpx import HTTPError  # the guarded client's; loaded with the first listing, not by every process

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = base_url.rstrip("/") + "/models"
    try:
        if owner_id:
            with guarded_client(timeout=1.5) as client:
                body = client.get(url, headers=headers).json()
        else:  # the deployment's own provider, at the address its operator configured
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=1.5) as resp:  # noqa: S310
                body = json.load(resp)
        names = [m["id"] for m in body.get("data", []) if isinstance(m, dict) and "id" in m]
    except (OSError, ValueError, KeyError, AttributeError, EgressRefused, HTTPError):
        names = []
    _listing_cache[key] = (time.monotonic(), names)
    return names


# An owner's base URL checked by the egress guard, kept a little while (a step must not resolve it every time).
_CHECKED_TTL_S = 30.0
_checked_bases: dict[tuple, float] = {}


def base_url_check(url: str) -> None:
    """Raise NotConfigured naming the reason when an owner's provider URL points inside (this host, its private
    network, link-local/metadata addresses); a name that does not resolve now is left to the call to report."""
    key = (url, tuple(settings.EGRESS_ALLOW))
    if time.monotonic() - _checked_bases.get(key, -_CHECKED_TTL_S) < _CHECKED_TTL_S:
        return
    try:
        check_url(url, base=True)
    except Unresolvable:
        return
    except EgressRefused as exc:
        raise NotConfigured(f"This provider's base URL cannot be used: {exc}.") from None
    _checked_bases[key] = time.monotonic()


# Where each kind of provider lists its models, relative to the base URL an owner gives.
_MODELS_PATH = {"ollama": "/v1/models", "anthropic": "/v1/models"}
REACH_TIMEOUT_S = 3.0


def provider_reach_check(*, kind: str, base_url: str, api_key: str, timeout: float = REACH_TIMEOUT_S) -> str | None:
    """Ask an owner's provider for its models once (one GET through the egress guard, at most `timeout` seconds):
    None when it answered as a provider does, else a sentence saying what is wrong. Network I/O, nothing cached."""
    import httpx  # the guarded client's; loaded by the settings page that checks, not by every process

    url = base_url.rstrip("/") + _MODELS_PATH.get(kind, "/models")
    if kind == "anthropic":
        headers = {"x-api-key": api_key, "anthropic-version": "2023-06-01"} if api_key else {}
    else:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with guarded_client(timeout=timeout) as client:
            response = client.get(url, headers=headers)
    except Unresolvable:
        return not_reachable(base_url, "its host name does not resolve.")
    except EgressRefused as exc:
        return f"This provider's base URL cannot be used: {exc}."
    except httpx.TimeoutException:
        return not_reachable(base_url, f"no answer within {timeout:g} s.")
    except httpx.HTTPError as exc:
        return not_reachable(base_url, f"{' '.join(str(exc).split()) or type(exc).__name__}.")
    if response.status_code in (401, 403):
        return f"The model provider at {base_url} refused the API key (HTTP {response.status_code})."
    if kind == "anthropic" and response.status_code < 500:
        return None  # reached; its listing's shape is not ours to judge
    try:
        listed = response.json().get("data") if response.status_code == 200 else None
    except (ValueError, AttributeError):
        listed = None
    if not isinstance(listed, list):
        return (
            f"The server at {base_url} answered {url} with HTTP {response.status_code}, not a list of models: "
            "is this the API's base URL (it often ends in /v1)?"
        )
    return None


def models_list(*, owner: Organization | None) -> list[dict]:
    """Model handles the owner can run, with their context windows."""

    out = []
    for p in providers_list(owner=owner):
        names = list(p.models)
        if p.base_url and p.kind in ("openai", "openai_compatible", "ollama") and not names:
            names = _listed_models(
                p.base_url if p.kind != "ollama" else p.base_url.rstrip("/") + "/v1",
                p.api_key,
                owner_id=owner.id if owner is not None and p.source == "settings" else "",
            )
        if not names:
            names = _KNOWN.get(p.kind, [])
        prefix = "openai" if p.kind == "openai_compatible" and p.name == "openai" else p.name
        for name in names:
            handle = f"{prefix}/{name}"
            out.append(
                {
                    "handle": handle,
                    "model": name,
                    "provider_name": p.name,
                    "model_endpoint_type": p.kind,
                    "model_endpoint": p.base_url or None,
                    "context_window": model_info(handle).context_window,
                }
            )
    return out


def model_resolve(*, owner: Organization | None, handle: str) -> ResolvedModel:
    """Map a handle ("provider/model") to a litellm call; NotConfigured with a how-to if no provider serves it.
    An owner's provider is called at its own base URL (or its service's public one) with its own key or NO_KEY."""
    providers = {p.name: p for p in providers_list(owner=owner)}
    if not providers:
        raise NotConfigured(CONFIGURE_HINT)
    prefix, _, name = handle.partition("/")
    provider = providers.get(prefix)
    if provider is not None and not name:
        raise NotConfigured(f"Model '{handle}' names a provider but no model: write it as '{prefix}/<model>'.")
    if provider is None:
        names = ", ".join(sorted(providers))
        raise NotConfigured(
            f"Model '{handle}' is not served by a configured provider: its name must start with one of "
            f"{names} (as in '{sorted(providers)[0]}/<model>'). Use one of their models, "
            f"or add a provider named '{prefix}' on the Settings page."
        )
    kind = {"openai_compatible": "openai"}.get(provider.kind, provider.kind)
    if provider.source == "settings":
        api_base = provider.base_url or _PUBLIC_BASE.get(provider.kind) or _OLLAMA_LOCAL
        if api_base not in _PUBLIC_BASE.values():
            base_url_check(api_base)
    else:  # the deployment's own: litellm's defaults for its kind are the environment's too
        api_base = provider.base_url or None
    return ResolvedModel(
        handle=handle,
        litellm_model=f"{kind}/{name}",
        api_base=api_base,
        api_key=provider.api_key or NO_KEY,
        provider=provider.name,
        guarded=provider.source == "settings",
    )


def operator_model_handles() -> frozenset[str]:
    """The model handles the operator configured, from the environment and settings alone (no server is asked):
    DEFAULT_MODEL, EMBEDDING_MODEL, METRICS_MODELS, and the curated models of each provider the environment sets."""
    handles = {settings.DEFAULT_MODEL, settings.EMBEDDING_MODEL, *settings.METRICS_MODELS}
    for p in _env_providers():
        handles.update(f"{p.name}/{name}" for name in _KNOWN.get(p.kind, ()))
    return frozenset(handles - {""})


def model_is_configured(*, owner: Organization | None, handle: str) -> bool:
    try:
        model_resolve(owner=owner, handle=handle)
    except NotConfigured:
        return False
    return True
