"""The built-in web tools: fetch_webpage through the egress guard (a local site, allowed only where the test says
so), web_search against a fake Exa and a fake SearXNG, the operator's network setting, and an agent's step calling
fetch_webpage through the fake model."""

import json

import pytest

from core.runs.runner import run_agent
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.tools.web_servers import FakeWeb, Route
from tools.models import ToolRun
from tools.web_fetch import WebToolError, fetch_webpage
from tools.web_search import web_search
from tools.web_tools import web_tool_execute


@pytest.fixture
def web():
    server = FakeWeb()
    yield server
    server.stop()


@pytest.fixture
def site(web, settings):
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    return web.site()


@pytest.fixture
def no_provider(settings):
    settings.EXA_API_KEY = ""
    settings.SEARXNG_URL = ""


# --- fetch_webpage ----------------------------------------------------------------------------------------------


def test_an_html_page_comes_back_as_markdown_without_its_boilerplate(site):
    text = fetch_webpage(url=f"{site.url}/otters.html")
    assert text.startswith("# Otters")
    assert "Otters are **semi-aquatic** mammals" in text
    assert f"[more]({site.url}/more.html)" in text  # links made absolute for the next fetch
    assert "an otter floating" in text and "base64" not in text  # an image is its alt text
    assert "- sea otter" in text
    for boilerplate in ("in-a-script", "color: red", "Menu-item-in-nav", "Footer-text"):
        assert boilerplate not in text
    assert site.seen[-1].headers["User-Agent"].startswith("Mozilla/5.0 (compatible; AgentsIDE")


def test_text_and_json_pass_through_unchanged(site):
    assert fetch_webpage(url=f"{site.url}/notes.txt") == "Plain notes \u2014 unchanged.\n"
    assert json.loads(fetch_webpage(url=f"{site.url}/data.json")) == {"otters": 2}


def test_an_untyped_body_is_judged_by_what_it_is(site):
    assert fetch_webpage(url=f"{site.url}/untyped").startswith("# Otters")
    with pytest.raises(WebToolError, match="not a web page"):
        fetch_webpage(url=f"{site.url}/untyped.bin")


def test_a_binary_file_is_a_clear_error(site):
    with pytest.raises(WebToolError) as caught:
        fetch_webpage(url=f"{site.url}/otter.png")
    assert "image/png" in str(caught.value) and "not binary files" in str(caught.value)


def test_redirects_are_followed_and_each_hop_is_checked(site):
    assert fetch_webpage(url=f"{site.url}/moved").startswith("# Otters")
    with pytest.raises(WebToolError) as caught:
        fetch_webpage(url=f"{site.url}/to-metadata")
    assert caught.value.type_name == "EgressRefused" and "link-local" in str(caught.value)


def test_without_the_operators_allowance_the_guard_refuses_loopback(web, settings):
    web.site()
    settings.EGRESS_ALLOW = []
    with pytest.raises(WebToolError) as caught:
        fetch_webpage(url=f"{web.url}/otters.html")
    assert caught.value.type_name == "EgressRefused"
    assert "loopback" in str(caught.value) and "EGRESS_ALLOW" in str(caught.value)
    assert web.seen == []  # refused before any connection


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "gopher://x"])
def test_only_http_and_https(url):
    with pytest.raises(WebToolError) as caught:
        fetch_webpage(url=url)
    scheme = url.split(":")[0]
    assert str(caught.value) == (
        f"Invalid URL scheme '{scheme}'. Only 'http' and 'https' URLs are supported. "
        "Local file paths (file://) and other protocols cannot be fetched."
    )
    assert caught.value.type_name == "ValueError"


def test_a_page_over_the_size_cap_is_cut_with_a_note(site, settings):
    settings.WEB_FETCH_MAX_BYTES = 1000
    text = fetch_webpage(url=f"{site.url}/big.html")
    assert "otter otter otter" in text
    assert text.endswith("[NOTE: the page is larger than 1000 bytes; only its first 1000 bytes were read]")
    assert len(text) < 1300


def test_an_http_error_and_a_slow_page_are_errors(site, settings):
    with pytest.raises(WebToolError, match="HTTP 404"):
        fetch_webpage(url=f"{site.url}/missing")
    settings.WEB_TOOLS_TIMEOUT_S = 0.5
    with pytest.raises(WebToolError, match="did not answer within 0.5 s"):
        fetch_webpage(url=f"{site.url}/slow.html")


def test_a_recorded_run_says_it_had_network(site, account):
    run = web_tool_execute(owner=account.org, name="fetch_webpage", args={"url": f"{site.url}/notes.txt"})
    assert run.pk and run.status == "success" and run.network and run.sandbox == "in-process"


def test_the_operators_network_setting_is_obeyed(site, account, settings):
    settings.TOOL_NETWORK = "off"
    run = web_tool_execute(owner=account.org, name="fetch_webpage", args={"url": f"{site.url}/otters.html"})
    assert run.status == "error" and not run.network and run.error_type == "PermissionError"
    assert "TOOL_NETWORK=off" in run.tool_return
    assert site.seen == []


def test_the_owners_network_off_is_obeyed_and_their_default_is_not_a_refusal(site, account):
    from core.models import OwnerSettings

    prefs = OwnerSettings.objects.create(owner=account.org, sandbox_allow_network=False)
    run = web_tool_execute(owner=account.org, name="fetch_webpage", args={"url": f"{site.url}/otters.html"})
    assert run.status == "error" and not run.network and "turned off for this account's tools" in run.tool_return
    assert site.seen == []
    prefs.sandbox_allow_network = None  # the deployment's default (no network for sandboxed code) is not a refusal
    prefs.save()
    run = web_tool_execute(owner=account.org, name="fetch_webpage", args={"url": f"{site.url}/otters.html"})
    assert run.status == "success" and run.network


# --- web_search -------------------------------------------------------------------------------------------------


def test_with_no_provider_the_error_names_the_settings(no_provider):
    with pytest.raises(WebToolError) as caught:
        web_search(secrets={}, query="otters")
    assert "EXA_API_KEY" in str(caught.value) and "SEARXNG_URL" in str(caught.value)


def test_an_empty_query_answers_as_letta_does(no_provider):
    assert json.loads(web_search(secrets={}, query="  ")) == {"error": "Query cannot be empty", "query": "  "}


def test_exa_is_asked_as_letta_asks_and_answers_in_lettas_shape(web, settings):
    web.exa()
    settings.EXA_API_KEY, settings.EXA_API_URL, settings.SEARXNG_URL = "exa-key", web.url, ""
    text = web_search(secrets={}, query="otters", num_results=500, category="news", include_domains=["example.org"])
    assert text.startswith('{\n  "query": "otters"')  # indent=2, as Letta
    out = json.loads(text)
    assert out["results"][0] == {
        "title": "About otters",
        "url": "https://example.org/otters",
        "published_date": "2025-01-02T00:00:00.000Z",
        "author": "A. Otter",
        "highlights": ["Otters hold hands.", "They sleep floating."],
        "summary": "Otters are social.",
    }  # no text unless include_text
    assert out["results"][1] == {
        "title": "Second",
        "url": "https://example.com/2",
        "published_date": None,
        "author": None,
    }
    asked = json.loads(web.seen[-1].body)
    assert asked["numResults"] == 100 and asked["type"] == "auto" and asked["category"] == "news"
    assert asked["includeDomains"] == ["example.org"] and "excludeDomains" not in asked
    assert asked["contents"] == {
        "text": False,
        "highlights": {"numSentences": 2, "highlightsPerUrl": 3, "query": "otters"},
        "summary": {"query": "Summarize the key information from this content related to: otters"},
    }
    with_text = json.loads(web_search(secrets={}, query="otters", include_text=True))
    assert with_text["results"][0]["text"] == "Full text of the page."


def test_the_agents_key_comes_before_the_servers(web, settings):
    web.exa(key="agents-key")
    settings.EXA_API_KEY, settings.EXA_API_URL = "servers-key", web.url
    out = json.loads(web_search(secrets={"EXA_API_KEY": "agents-key"}, query="otters"))
    assert len(out["results"]) == 2 and web.seen[-1].headers["x-api-key"] == "agents-key"


def test_a_providers_failure_is_lettas_search_failed_answer(web, settings):
    web.exa(key="right")
    settings.EXA_API_KEY, settings.EXA_API_URL = "wrong", web.url
    out = json.loads(web_search(secrets={}, query="otters"))
    assert out["query"] == "otters" and out["error"].startswith("Search failed: ") and "401" in out["error"]


def test_searxng_for_self_hosters(web, settings):
    web.searxng()
    settings.EXA_API_KEY, settings.SEARXNG_URL = "", web.url + "/"
    out = json.loads(web_search(secrets={}, query="otters", num_results=4, category="news"))
    assert [r["url"] for r in out["results"]] == [
        "https://news.example.org/a",
        "https://blog.example.com/b",
        "https://example.org/c",
        "https://other.net/d",
    ]
    assert out["results"][0] == {
        "title": "A",
        "url": "https://news.example.org/a",
        "published_date": None,
        "author": None,
        "highlights": ["snippet a"],
    }
    assert out["results"][2]["author"] == "Cee" and "highlights" not in out["results"][2]
    first = web.seen[0]
    assert (
        first.query["format"] == ["json"] and first.query["categories"] == ["news"] and first.query["q"] == ["otters"]
    )
    assert [s.query["pageno"] for s in web.seen] == [["1"], ["2"]]  # a second page for the fourth result


def test_searxng_filters_domains_and_dates_on_the_results(web, settings):
    web.searxng()
    settings.EXA_API_KEY, settings.SEARXNG_URL = "", web.url
    out = json.loads(web_search(secrets={}, query="otters", include_domains=["example.org"], num_results=2))
    assert [r["url"] for r in out["results"]] == ["https://news.example.org/a", "https://example.org/c"]
    assert web.seen[0].query["q"] == ["otters site:example.org"]
    out = json.loads(web_search(secrets={}, query="otters", exclude_domains=["example.org"], num_results=10))
    assert [r["url"] for r in out["results"]] == ["https://blog.example.com/b", "https://other.net/d"]
    out = json.loads(web_search(secrets={}, query="otters", start_published_date="2024-01-01", num_results=10))
    assert "https://blog.example.com/b" not in [r["url"] for r in out["results"]]  # published 2020


def test_an_agents_own_searxng_url_goes_through_the_egress_guard(web, settings):
    web.searxng()
    settings.EXA_API_KEY, settings.SEARXNG_URL, settings.EGRESS_ALLOW = "", "", []
    with pytest.raises(WebToolError) as caught:
        web_search(secrets={"SEARXNG_URL": web.url}, query="otters")
    assert caught.value.type_name == "EgressRefused" and "loopback" in str(caught.value)
    assert web.seen == []
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    assert len(json.loads(web_search(secrets={"SEARXNG_URL": web.url}, query="otters"))["results"]) == 4


def test_searxng_without_its_json_format_says_how_to_enable_it(web, settings):
    web.routes["/search"] = Route(403, b"Forbidden", "text/plain")
    settings.EXA_API_KEY, settings.SEARXNG_URL = "", web.url
    out = json.loads(web_search(secrets={}, query="otters"))
    assert "enable the json format" in out["error"]


# --- in an agent's step -----------------------------------------------------------------------------------------


def test_the_agent_fetches_a_page_through_the_fake_model(site, account, fake_llm):
    agent = make_agent(account.org, tools=["fetch_webpage"])
    fake_llm.script(
        FakeLLM.tool("fetch_webpage", {"url": f"{site.url}/otters.html"}, heartbeat=True),
        FakeLLM.tool("fetch_webpage", {"url": "file:///etc/passwd"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Otters are semi-aquatic."}),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "otters?"}])
    assert result.status == "completed"
    offered = {t["function"]["name"]: t["function"] for t in fake_llm.chat_requests[0]["tools"]}
    assert offered["fetch_webpage"]["parameters"]["properties"]["url"]["type"] == "string"
    assert "web_search" not in offered  # never attached unless named
    returns = [m for m in result.messages if m["message_type"] == "tool_return_message"]
    assert returns[0]["status"] == "success" and "Otters are **semi-aquatic** mammals" in returns[0]["tool_return"]
    assert returns[1]["status"] == "error"
    failed = returns[1]["tool_return"]  # the message of what the model read (Letta's {status, message, time})
    assert failed.startswith("Error executing function fetch_webpage: ValueError: Invalid URL scheme 'file'")
    runs = ToolRun.objects.filter(agent_id=agent.id, tool_name="fetch_webpage").order_by("created_at")
    assert [r.status for r in runs] == ["success", "error"]
    assert all(r.origin == "agent" and r.step_id and r.network and r.tool_id for r in runs)


def test_a_web_tool_runs_outside_a_step_as_lettas_agents_tools_run(site, api, account):
    agent = make_agent(account.org, tools=["fetch_webpage"])
    body = api.post(f"/v1/agents/{agent.id}/tools/fetch_webpage/run", {"args": {"url": f"{site.url}/notes.txt"}})
    assert body.status_code == 200
    assert body.json()["status"] == "success" and body.json()["func_return"] == "Plain notes \u2014 unchanged.\n"
    bad = api.post(f"/v1/agents/{agent.id}/tools/fetch_webpage/run", {"args": {"href": "x"}}).json()
    assert bad["status"] == "error" and bad["func_return"] is None and "InvalidArguments" in bad["error_message"]
