"""A provider's base URL may be long (a proxy's path and token), up to BASE_URL_MAX characters; a longer one is refused
on the Settings page with the reason, never stored nor failing the database (URLField's column was 200 characters:
PostgreSQL refused the row with a 500). Runs on both databases."""

import pytest
from django.test import Client

from core import providers
from core.models import BASE_URL_MAX, ProviderConfig


def _url(length: int) -> str:
    head = "https://proxy.example.com/v1/"
    return head + "a" * (length - len(head))


def _post(account, base_url: str):
    web = Client()
    web.force_login(account.user)
    return web.post(
        "/settings/providers/",
        {
            "kind": "openai_compatible",
            "name": "proxy",
            "base_url": base_url,
            "api_key": "k",
            "model_names": "m",
            "save_anyway": "on",
        },  # the name does not resolve here: saved all the same
    )


@pytest.mark.parametrize("length", [201, BASE_URL_MAX])
def test_a_long_base_url_is_stored_whole(account, settings, length):
    settings.EGRESS_ALLOW = ["proxy.example.com"]
    url = _url(length)
    r = _post(account, url)
    assert r.status_code == 302, r.content[:2000]
    assert ProviderConfig.objects.get(owner=account.org, name="proxy").base_url == url
    assert providers.model_resolve(owner=account.org, handle="proxy/m").api_base == url


def test_a_base_url_over_the_limit_is_refused_with_the_reason(account, settings):
    settings.EGRESS_ALLOW = ["proxy.example.com"]
    r = _post(account, _url(BASE_URL_MAX + 40))
    assert r.status_code == 400
    assert f"at most {BASE_URL_MAX} characters" in r.content.decode()
    assert not ProviderConfig.objects.filter(owner=account.org).exists()
