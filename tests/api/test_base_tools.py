"""Letta Code's agent setup against the API: `POST /v1/tools/add-base-tools`, finding the web tools by name and
by search, creating an agent with them, and Letta's 400 for a tool it names that does not exist (reference
letta-conversations-approvals-files.md §4.3-§4.4). The letta-client SDK does the same over real HTTP."""

import letta_client
import pytest
from letta_client import Letta
from letta_client.types import Tool as SdkTool

from core.engine.base_tools import (
    BASE_TOOL_NAMES,
    CODE_TOOL_NAMES,
    FILE_TOOL_NAMES,
    LETTA_TYPE_OF_BASE,
    MULTI_AGENT_TOOL_NAMES,
    SLEEPTIME_TOOL_NAMES,
    WEB_TOOL_SCHEMAS,
)
from core.models import Agent
from tests.factories import make_agent
from tools.models import Tool

WEB = ["web_search", "fetch_webpage"]
AGENT = {"name": "coder", "model": "openai/fake-model", "context_window_limit": 16000}


@pytest.fixture
def old_account(account):
    """An account made before the web tools were built in: it has the other built-ins only."""
    Tool.objects.filter(owner=account.org, name__in=WEB).delete()
    return account


def test_add_base_tools_installs_and_returns_them_idempotently(api, old_account):
    first = api.post("/v1/tools/add-base-tools")
    assert first.status_code == 200
    tools = {t["name"]: t for t in first.json()}
    assert set(tools) == {*BASE_TOOL_NAMES, *MULTI_AGENT_TOOL_NAMES, *LETTA_TYPE_OF_BASE}
    assert {*WEB, *FILE_TOOL_NAMES, *SLEEPTIME_TOOL_NAMES} <= set(LETTA_TYPE_OF_BASE)
    assert {tools[n]["tool_type"] for n in SLEEPTIME_TOOL_NAMES} == {"letta_sleeptime_core"}
    assert {tools[n]["tool_type"] for n in FILE_TOOL_NAMES} == {"letta_files_core"}  # Letta's set has them too
    search = tools["web_search"]
    assert search["tool_type"] == "letta_builtin" and search["tags"] == ["letta_builtin"]
    assert search["json_schema"]["parameters"] == WEB_TOOL_SCHEMAS["web_search"]["parameters"]
    assert search["json_schema"]["parameters"]["required"] == ["query"]
    assert set(search["json_schema"]["parameters"]["properties"]) == {
        "query",
        "num_results",
        "category",
        "include_text",
        "include_domains",
        "exclude_domains",
        "start_published_date",
        "end_published_date",
        "user_location",
    }  # (PostgreSQL's jsonb keeps no key order)
    assert tools["fetch_webpage"]["json_schema"]["parameters"] == {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The URL of the webpage to fetch and convert"}},
        "required": ["url"],
    }
    assert tools["send_message"]["tool_type"] == "letta_core"
    count = Tool.objects.filter(owner=old_account.org).count()
    again = api.post("/v1/tools/add-base-tools").json()
    assert {t["name"]: t["id"] for t in again} == {n: t["id"] for n, t in tools.items()}
    assert Tool.objects.filter(owner=old_account.org).count() == count


def test_listing_by_name_finds_a_web_tool_an_old_account_lacked(api, old_account):
    found = api.get("/v1/tools/?name=web_search&limit=10").json()
    assert [t["name"] for t in found] == ["web_search"]
    builtin = api.get("/v1/tools/?tool_types=letta_builtin").json()
    assert sorted(t["name"] for t in builtin) == sorted([*WEB, *CODE_TOOL_NAMES])  # Letta's BUILTIN_TOOLS
    core = api.get("/v1/tools/?tool_types=letta_core&limit=100").json()
    assert "send_message" in {t["name"] for t in core} and not {t["name"] for t in core} & set(WEB)


def test_a_tool_id_route_is_still_a_tool_id_route(api, account):
    tool = Tool.objects.get(owner=account.org, name="fetch_webpage")
    assert api.get(f"/v1/tools/{tool.id}").json()["name"] == "fetch_webpage"
    assert api.patch(f"/v1/tools/{tool.id}", {"description": "x"}).status_code == 403  # built-ins are locked


def test_a_custom_tool_cannot_take_a_web_tools_name(api):
    source = 'def web_search(query: str) -> str:\n    """Mine.\n\n    Args:\n        query: words.\n    """\n    return query\n'
    refused = api.post("/v1/tools/", {"source_code": source})
    assert refused.status_code == 409 and "built-in" in refused.json()["detail"]


def test_create_an_agent_as_letta_code_does(api, old_account):
    body = {
        **AGENT,
        "agent_type": "letta_v1_agent",
        "include_base_tools": False,
        "include_base_tool_rules": False,
        "tools": WEB,
        "tags": ["origin:letta-code"],
    }
    created = api.post("/v1/agents/", body)
    assert created.status_code == 201, created.content
    assert sorted(t["name"] for t in created.json()["tools"]) == sorted(WEB)


def test_an_unknown_tool_name_is_lettas_400_and_creates_nothing(api, account):
    response = api.post("/v1/agents/", {**AGENT, "tools": ["no_such_tool", "fetch_webpage", "nor_this"]})
    assert response.status_code == 400
    assert response.json() == {"detail": "Tools not found by name: {'no_such_tool', 'nor_this'}"}
    response = api.post("/v1/agents/", {**AGENT, "tool_ids": ["tool-missing"]})
    assert response.status_code == 400
    assert response.json() == {"detail": "Tools not found by id:   {'tool-missing'}"}
    assert not Agent.objects.filter(owner=account.org).exists()


def test_update_replaces_the_tools_and_refuses_an_unknown_id(api, account):
    agent = make_agent(account.org)
    web = list(Tool.objects.filter(owner=account.org, name__in=WEB).values_list("id", flat=True))
    current = [t["id"] for t in api.get(f"/v1/agents/{agent.id}/tools").json()]
    updated = api.patch(f"/v1/agents/{agent.id}", {"tool_ids": current + web})
    assert updated.status_code == 200
    assert set(WEB) <= {t["name"] for t in updated.json()["tools"]}
    refused = api.patch(f"/v1/agents/{agent.id}", {"tool_ids": ["tool-gone"], "name": "renamed"})
    assert refused.status_code == 400 and refused.json() == {"detail": "Tools not found by id:   {'tool-gone'}"}
    after = api.get(f"/v1/agents/{agent.id}").json()
    assert after["name"] == agent.name and set(WEB) <= {t["name"] for t in after["tools"]}


def test_search_tools_by_words(api, account):
    found = api.post("/v1/tools/search", {"query": "fetch a webpage"}).json()
    assert found[0]["tool"]["name"] == "fetch_webpage" and found[0]["fts_rank"] == 1
    assert found[0]["vector_rank"] is None and found[0]["combined_score"] > 0
    assert [r["fts_rank"] for r in found] == list(range(1, len(found) + 1))
    only = api.post("/v1/tools/search", {"query": "web", "tool_types": ["letta_builtin"], "limit": 1}).json()
    assert len(only) == 1 and only[0]["tool"]["tool_type"] == "letta_builtin"
    tagged = api.post("/v1/tools/search", {"tags": ["multi_agent"]}).json()
    assert {r["tool"]["name"] for r in tagged} == set(MULTI_AGENT_TOOL_NAMES)
    vector = api.post("/v1/tools/search", {"query": "web", "search_mode": "vector"})
    assert vector.status_code == 400 and "embeddings" in vector.json()["detail"]
    source = 'def fetch_weather_data(city: str) -> str:\n    """Fetch weather.\n\n    Args:\n        city: Where, for a temperature forecast.\n    """\n    return city\n'
    assert api.post("/v1/tools/", {"source_code": source}).status_code == 201
    found = api.post("/v1/tools/search", {"query": "get temperature forecast"}).json()  # a parameter's words count
    assert found[0]["tool"]["name"] == "fetch_weather_data"


@pytest.mark.django_db(transaction=True)
def test_the_sdk_sets_up_an_agent_as_letta_code_does(live_server, old_account, fake_llm):
    client = Letta(base_url=live_server.url, api_key=old_account.token, max_retries=0, timeout=60)
    with pytest.raises(letta_client.BadRequestError) as caught:
        client.agents.create(**AGENT, tools=["web_search", "no_such_tool"])
    assert caught.value.status_code == 400
    assert "Tools not found by name: {'no_such_tool'}" in str(caught.value)
    patcher = client.agents.create(**AGENT, tools=["memory_apply_patch"], include_base_tools=False)
    assert [(t.name, t.tool_type) for t in patcher.tools] == [("memory_apply_patch", "letta_memory_core")]
    installed = client.post("/v1/tools/add-base-tools", cast_to=list[SdkTool])
    assert {"web_search", "fetch_webpage"} <= {t.name for t in installed}
    agent = client.agents.create(**AGENT, tools=WEB, include_base_tools=False)
    assert sorted(t.name for t in agent.tools) == sorted(WEB)
    assert [t.name for t in client.tools.list(name="web_search")] == ["web_search"]
    results = client.tools.search(query="search the web", limit=3)
    assert results[0].tool.name == "web_search" and results[0].tool.tool_type == "letta_builtin"
    client.agents.update(agent.id, tool_ids=[t.id for t in agent.tools if t.name == "fetch_webpage"])
    assert [t.name for t in client.agents.retrieve(agent.id).tools] == ["fetch_webpage"]


def test_the_sleeptime_memory_tools_install_and_run_when_named(api, account):
    """Letta's memory_rethink rewrites a whole block and memory_finish_edits answers None (Letta's
    letta/functions/function_sets/base.py); both are listed by the upsert but attached only when named."""
    listed = api.get("/v1/tools/?tool_types=letta_sleeptime_core").json()
    assert sorted(t["name"] for t in listed) == sorted(SLEEPTIME_TOOL_NAMES)
    plain = api.post("/v1/agents/", {**AGENT, "name": "plain"}).json()
    assert not {t["name"] for t in plain["tools"]} & set(SLEEPTIME_TOOL_NAMES)
    body = {**AGENT, "name": "rethinker", "tools": list(SLEEPTIME_TOOL_NAMES), "include_base_tools": False}
    body["memory_blocks"] = [{"label": "human", "value": "Alice.\nLikes tea.", "limit": 40}]
    agent = api.post("/v1/agents/", body).json()
    assert sorted(t["name"] for t in agent["tools"]) == sorted(SLEEPTIME_TOOL_NAMES)
    run = f"/v1/agents/{agent['id']}/tools"
    done = api.post(f"{run}/memory_rethink/run", {"args": {"label": "human", "new_memory": "Alice likes coffee."}})
    assert done.status_code == 200 and done.json()["status"] == "success"
    block = api.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human").json()
    assert block["value"] == "Alice likes coffee."
    numbered = api.post(f"{run}/memory_rethink/run", {"args": {"label": "human", "new_memory": "a\nLine 2: b"}})
    assert numbered.json()["status"] == "error" and "line number" in numbered.json()["error_message"]
    too_long = api.post(f"{run}/memory_rethink/run", {"args": {"label": "human", "new_memory": "x" * 41}})
    assert too_long.json()["status"] == "error"
    assert api.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human").json()["value"] == "Alice likes coffee."
    finished = api.post(f"{run}/memory_finish_edits/run", {"args": {}}).json()
    assert finished["status"] == "success" and finished["func_return"] == "None"
