"""Letta SDK compatibility of the API surface, tried as a Letta user would: letta-client 1.x against the live server.

Each test follows the SDK's and Letta's documented behaviour (auto-pagination with `after`/`before` cursors,
`args_json_schema`, agent file import/export options, status codes), with the fake LLM behind litellm.
"""

import inspect
import json
import textwrap

import httpx
import letta_client
import pytest
from letta_client import Letta
from pydantic import BaseModel, Field

from core.models import Message
from tests.core.agentfile_fixtures import fixture_names, fixture_path
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


def _agent(client, **kwargs):
    kwargs.setdefault("memory_blocks", [{"label": "human", "value": "Name: Alice"}])
    kwargs.setdefault("agent_type", "memgpt_v2_agent")  # these scripts reply through send_message
    return client.agents.create(model="openai/fake-model", context_window_limit=16000, **kwargs)


def _say(client, agent_id: str, fake_llm, text: str):
    fake_llm.script(FakeLLM.tool("send_message", {"message": f"re: {text}"}))
    return client.agents.messages.create(agent_id, messages=[{"role": "user", "content": text}])


# --------------------------------------------------------------------------- pagination


def test_blocks_list_auto_paginates_each_block_once_in_both_orders(client):
    made = [client.blocks.create(label=f"notes_{i}", value=f"v{i}").id for i in range(5)]
    assert [b.id for b in client.blocks.list(limit=2)] == made  # Letta's default order: oldest first
    assert [b.id for b in client.blocks.list(limit=2, order="desc")] == made[::-1]
    page = client.blocks.list(limit=2, before=made[3])  # the two nearest the cursor, still oldest first
    assert [b.id for b in page.items] == made[1:3]
    assert [b.id for b in client.blocks.list(before=made[3], limit=1)] == made[:3][::-1]  # SDK walks backwards
    assert [b.id for b in client.blocks.list(label_search="notes_4")] == [made[4]]
    with pytest.raises(letta_client.NotFoundError):  # an unknown cursor is a 404, as in Letta
        client.blocks.list(after="block-00000000-0000-4000-8000-000000000000")


def test_runs_list_pages_and_filters_by_agent_ids(client, fake_llm):
    a, b = _agent(client, name="pager-a"), _agent(client, name="pager-b")
    runs_a = [_say(client, a.id, fake_llm, f"a{i}").messages[0].run_id for i in range(3)]
    run_b = _say(client, b.id, fake_llm, "b").messages[0].run_id
    listed = [r.id for r in client.runs.list(limit=1)]
    assert listed == [run_b, *runs_a[::-1]]  # newest first, every run once, and the iteration ends
    assert [r.id for r in client.runs.list(agent_ids=[a.id], limit=2)] == runs_a[::-1]
    assert [r.id for r in client.runs.list(agent_id=b.id)] == [run_b]
    assert [r.id for r in client.runs.list(order="asc", limit=2)] == [*runs_a, run_b]
    assert [r.id for r in client.runs.list(agent_ids=[a.id], statuses=["failed"])] == []


def test_run_messages_and_steps_auto_paginate(client, fake_llm):
    agent = _agent(client)
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "noted"}),
    )
    run_id = (
        client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "I like tea"}]).messages[0].run_id
    )
    everything = [(m.id, m.message_type) for m in client.runs.messages.list(run_id)]
    assert ("tool_call_message" in {t for _, t in everything}) and len(everything) >= 4
    assert [(m.id, m.message_type) for m in client.runs.messages.list(run_id, limit=1)] == everything
    # One stored message may show as several (reasoning, then its tool call): rows come newest first.
    newest_first = [m.id for m in client.runs.messages.list(run_id, order="desc", limit=2)]
    assert list(dict.fromkeys(newest_first)) == list(dict.fromkeys(i for i, _ in everything))[::-1]
    steps = [s.id for s in client.runs.steps.list(run_id)]
    assert len(steps) == 2 and [s.id for s in client.runs.steps.list(run_id, limit=1)] == steps


# --------------------------------------------------------------------------- tools


class WeatherArgs(BaseModel):
    city: str = Field(..., description="The city to look up.")
    days: int = Field(1, description="How many days ahead.")


WEATHER = '''
def forecast(city, days=1):
    """Forecast the weather.

    Args:
        city: unused here; the args schema describes it.
    """
    return f"sunny in {city} for {days} day(s)"
'''


def test_tool_from_args_json_schema_and_letta_error_codes(client, fake_llm):
    tool = client.tools.create(source_code=WEATHER, args_json_schema=WeatherArgs.model_json_schema())
    params = tool.json_schema["parameters"]
    assert tool.name == "forecast" and tool.json_schema["description"] == "Forecast the weather."
    assert params["required"] == ["city"] and params["properties"]["days"]["type"] == "integer"
    assert params["properties"]["city"]["description"] == "The city to look up."
    other = {"name": "other", "description": "x", "parameters": {"type": "object", "properties": {}}}
    assert client.tools.create(source_code=WEATHER, json_schema=other).name == "other"  # Letta names it by its schema
    with pytest.raises(letta_client.BadRequestError):  # ...but new source on update must define it
        client.tools.update(tool.id, source_code=WEATHER, json_schema={**other, "name": "elsewhere"})
    with pytest.raises(letta_client.BadRequestError):
        client.tools.create(source_code=WEATHER, args_json_schema={"type": "array"})
    agent = _agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.agents.messages.create(agent.id, input="hi", messages=[{"role": "user", "content": "hi"}])
    assert client.runs.list(agent_ids=[agent.id]).items == []  # nothing was started


class InventoryItem(BaseModel):
    sku: str
    name: str
    price: float
    category: str


class InventoryEntry(BaseModel):
    timestamp: int
    item: InventoryItem
    transaction_id: str


class InventoryEntryData(BaseModel):
    data: InventoryEntry
    quantity_change: int


class ManageInventoryTool:  # letta_client 0.x's BaseTool: `run` is posted as the tool's function
    name = "manage_inventory"
    args_schema = InventoryEntryData

    def run(self, data: InventoryEntry, quantity_change: int) -> bool:
        """Update inventory catalogue with a new data entry."""
        print(f"Updated inventory for {data.item.name} with a quantity change of {quantity_change}")
        return True


class PlanStep(BaseModel):
    name: str = Field(..., description="Name of the step.")
    description: str = Field(..., description="What this step is trying to achieve.")


class StepsList(BaseModel):
    steps: list[PlanStep] = Field(..., description="List of steps to add to the task plan.")
    explanation: str = Field(..., description="Explanation for the list of steps.")


def create_task_plan(steps, explanation):
    """Creates a task plan for the current task."""
    print(f"Created task plan with {len(steps)} steps, first {steps[0].name}: {explanation}")
    return [step.name for step in steps]


def _tool_from_class(client, tool):
    """What letta_client 0.x's `tools.add(tool=...)` posts: run's source renamed, args_json_schema from args_schema."""
    source = textwrap.dedent(inspect.getsource(tool.run)).replace("def run", f"def {tool.name}")
    return client.tools.upsert(source_code=source, args_json_schema=tool.args_schema.model_json_schema())


def test_tools_from_pydantic_args_schemas_run_with_their_models(client, fake_llm):
    """Letta's test_pydantic_inventory_management_tool and test_pydantic_task_planning_tool: the sandbox defines the
    args schema's models before the source and builds the arguments from them (tool_sandbox/base.py)."""
    inventory = _tool_from_class(client, ManageInventoryTool)
    plan = client.tools.upsert(  # letta_client 0.x's upsert_from_function
        source_code=textwrap.dedent(inspect.getsource(create_task_plan)),
        args_json_schema=StepsList.model_json_schema(),
    )
    assert "$defs" in inventory.json_schema["parameters"] and "self" not in inventory.json_schema["parameters"]
    agent = client.agents.create(model="openai/fake-model", tool_ids=[inventory.id, plan.id], include_base_tools=False)
    entry = {
        "timestamp": 1640995200,
        "item": {"sku": "IPH15-001", "name": "iPhone 15", "price": 999.99, "category": "Electronics"},
        "transaction_id": "TXN-12345",
    }
    steps = [{"name": "Schedule", "description": "find a time"}, {"name": "Invite", "description": "tell all"}]
    fake_llm.script(
        FakeLLM.tool("manage_inventory", {"data": entry, "quantity_change": 10}),
        FakeLLM.tool("create_task_plan", {"steps": steps, "explanation": "a tidy meeting"}),
        FakeLLM.text("Done."),
    )
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "Update the inventory"}])
    returns = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert [r.status for r in returns] == ["success", "success"], [r.tool_return for r in returns]
    assert returns[0].tool_return == "True"
    assert "Updated inventory for iPhone 15 with a quantity change of 10" in "\n".join(returns[0].stdout)
    assert json.loads(returns[1].tool_return) == ["Schedule", "Invite"]
    assert "Created task plan with 2 steps, first Schedule: a tidy meeting" in "\n".join(returns[1].stdout)


# --------------------------------------------------------------------------- agents


def test_delete_agent_detaches_a_standalone_block_and_deletes_its_own(client):
    shared = client.blocks.create(label="policies", value="Be kind.")
    agent = _agent(client, block_ids=[shared.id])
    own = client.agents.blocks.retrieve("human", agent_id=agent.id)
    client.agents.delete(agent.id)
    assert client.blocks.retrieve(shared.id).value == "Be kind."
    assert [a.id for a in client.blocks.agents.list(shared.id)] == []
    with pytest.raises(letta_client.NotFoundError):
        client.blocks.retrieve(own.id)


def test_blocks_made_on_their_own_default_to_lettas_block_limit(client):
    """Letta's CreateBlock: limit CORE_MEMORY_BLOCK_CHAR_LIMIT (100,000) for every label (tests/sdk/blocks_test.py)."""
    for label in ("human", "persona", "notes"):
        assert client.blocks.create(label=label, value="test").limit == 100_000
    block = client.blocks.create(label="persona", value="test1")
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.blocks.update(block.id, value="testing testing testing", limit=10)
    assert client.blocks.retrieve(block.id).limit == 100_000


def test_create_defaults_names_rules_initial_messages(client):
    first, second = _agent(client), _agent(client)
    assert first.name != second.name and first.name != "agent" and first.name and second.name
    assert first.memory.blocks[0].limit == 100_000 and client.blocks.create(label="x", value="y").limit == 100_000
    assert (
        first.llm_config.context_window == 16000
        and client.agents.create(model="openai/fake-model").llm_config.context_window <= 32000
    )
    rule = {"type": "exit_loop", "tool_name": "send_message"}
    agent = _agent(
        client,
        tool_rules=[rule, rule],
        initial_message_sequence=[
            {"role": "user", "content": "Remember: my name is Ada."},
            {"role": "assistant", "content": "Noted, Ada."},
        ],
    )
    assert [(r.type, r.tool_name) for r in agent.tool_rules] == [("exit_loop", "send_message")]
    assert len(agent.message_ids) == 4  # system, user, then Letta's send_message call and its return
    shown = [(m.message_type, getattr(m, "content", None)) for m in client.agents.messages.list(agent.id, order="asc")]
    assert ("user_message", "Remember: my name is Ada.") in shown
    with pytest.raises(letta_client.UnprocessableEntityError):
        _agent(client, initial_message_sequence=[{"role": "tool", "content": "x"}])


def test_embedding_config_names_the_embedding_model(client, fake_llm):
    agent = _agent(
        client,
        embedding_config={
            "embedding_endpoint_type": "openai",
            "embedding_model": "text-embedding-3-small",
            "embedding_dim": fake_llm.embedding_dim,
        },
    )
    assert agent.embedding_config.handle == "openai/text-embedding-3-small"
    client.agents.passages.create(agent.id, text="The launch code is 1234.")
    assert len(fake_llm.embedding_requests) == 1  # embedded with the model the client named
    status = client.get(f"/v1/agents/{agent.id}/archival-memory/status", cast_to=httpx.Response).json()
    assert status["search_mode"] != "full_text" and status["embedding"] == "openai/text-embedding-3-small"


def test_agents_tools_run_runs_built_in_tools(client, fake_llm):
    agent = _agent(client, tools=["send_message_to_agent_async"])
    out = client.agents.tools.run(
        "core_memory_append", agent_id=agent.id, args={"label": "human", "content": "Likes tea."}
    )
    assert out.status == "success"
    assert client.agents.blocks.retrieve("human", agent_id=agent.id).value == "Name: Alice\nLikes tea."
    out = client.agents.tools.run(
        "core_memory_replace",
        agent_id=agent.id,
        args={"label": "human", "old_content": "nothing like this", "new_content": "x"},
    )
    assert out.status == "error" and "Likes tea." in client.agents.blocks.retrieve("human", agent_id=agent.id).value
    _say(client, agent.id, fake_llm, "the harbour at dawn")
    found = client.agents.tools.run("conversation_search", agent_id=agent.id, args={"query": "harbour"})
    assert found.status == "success" and "harbour at dawn" in found.func_return
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.agents.tools.run(
            "send_message_to_agent_async", agent_id=agent.id, args={"message": "x", "other_agent_id": agent.id}
        )


# --------------------------------------------------------------------------- errors


def test_unknown_routes_and_methods_answer_json(client, live_server, account):
    r = httpx.get(f"{live_server.url}/v1/no-such-thing", headers={"Authorization": f"Bearer {account.token}"})
    assert r.status_code == 404 and "no API route" in r.json()["detail"]
    r = httpx.delete(f"{live_server.url}/v1/models/", headers={"Authorization": f"Bearer {account.token}"})
    assert r.status_code == 405 and "GET" in r.json()["allowed_methods"] and "GET" in r.headers["Allow"]
    with pytest.raises(letta_client.NotFoundError):
        client.agents.retrieve("agent-00000000-0000-4000-8000-000000000000")


@pytest.mark.parametrize("headers", [{"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {}])
def test_bad_or_missing_credentials_are_401_on_every_method(live_server, headers):
    for method, path in (
        ("POST", "/v1/agents/"),
        ("PATCH", "/v1/blocks/block-x"),
        ("DELETE", "/v1/agents/agent-x"),
        ("GET", "/v1/agents/"),
    ):
        r = httpx.request(method, f"{live_server.url}{path}", headers=headers, json={})
        assert r.status_code == 401, (method, path, r.text)
        assert "Authentication required" in r.json()["detail"]
    with pytest.raises(letta_client.AuthenticationError):
        Letta(base_url=live_server.url, api_key="wrong", max_retries=0).agents.create(name="x")


# --------------------------------------------------------------------------- agent files


def _import(client, content: bytes, **kwargs):
    return client.agents.import_file(file=("agent.af", content, "application/json"), **kwargs).agent_ids


def test_legacy_export_round_trips_and_import_options_follow_letta(client, fake_llm):
    tool = client.tools.create(source_code=WEATHER, args_json_schema=WeatherArgs.model_json_schema())
    agent = _agent(client, name="traveller", tool_ids=[tool.id])
    _say(client, agent.id, fake_llm, "hello")
    legacy = json.loads(client.agents.export_file(agent.id, use_legacy_format=True))
    assert "core_memory" in legacy and "agents" not in legacy
    assert "forecast" in {t["name"] for t in legacy["tools"]}
    client.tools.update(tool.id, description="edited on the server")
    (copy_id,) = _import(client, json.dumps(legacy).encode(), append_copy_suffix=True)
    copy = client.agents.retrieve(copy_id)
    assert copy.name == "traveller_copy"
    assert [b.value for b in copy.memory.blocks] == ["Name: Alice"]
    # Letta overwrites an existing same-named tool by default.
    assert client.tools.retrieve(tool.id).description == "Forecast the weather."
    originals = {m.content: m.date for m in client.agents.messages.list(agent.id) if m.message_type == "user_message"}
    copies = {m.content: m.date for m in client.agents.messages.list(copy_id) if m.message_type == "user_message"}
    assert copies == originals  # timestamps kept, not the import time
    client.tools.update(tool.id, description="edited again")
    _import(client, json.dumps(legacy).encode(), override_existing_tools=False)
    assert client.tools.retrieve(tool.id).description == "edited again"


def test_import_is_lenient_about_what_it_cannot_keep(client, live_server, account):
    agent = _agent(client, name="lenient", tools=["send_message"])
    data = json.loads(client.agents.export_file(agent.id))
    long_name = "t" * 65
    data["tools"].append(
        {
            "id": "tool-long",
            "name": long_name,
            "tool_type": "custom",
            "source_code": "def x(): pass",
            "json_schema": {"name": long_name, "parameters": {"type": "object", "properties": {}}},
        }
    )
    data["agents"][0]["tool_ids"].append("tool-long")
    data["agents"][0]["tool_rules"] += [
        {"type": "exit_loop", "tool_name": ""},
        {"type": "exit_loop", "tool_name": "send_message"},
    ]
    raw = json.dumps(data).encode()
    preview = httpx.post(
        f"{live_server.url}/v1/agents/import/preview",
        files={"file": ("a.af", raw)},
        headers={"Authorization": f"Bearer {account.token}"},
    ).json()
    assert any("limit is 64" in w for w in preview["warnings"]) and any(
        "names no tool" in w for w in preview["warnings"]
    )
    (new_id,) = _import(client, raw)
    imported = client.agents.retrieve(new_id)
    assert long_name not in {t.name for t in imported.tools} and "send_message" in {t.name for t in imported.tools}
    assert all(r.tool_name for r in imported.tool_rules)
    sends = [(r.type, r.tool_name) for r in imported.tool_rules if r.tool_name == "send_message"]
    assert sends == [("exit_loop", "send_message")]  # the file's repeat of the rule was kept once


def test_tool_names_up_to_64_characters(client):
    name = "n" * 64
    tool = client.tools.create(
        source_code=f'def {name}(x: str) -> str:\n    """Echo.\n\n    Args:\n        x: text\n    """\n    return x\n'
    )
    assert tool.name == name
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.tools.create(
            source_code=f'def {name}n(x: str) -> str:\n    """Echo.\n\n    Args:\n        x: text\n    """\n    return x\n'
        )


@pytest.mark.parametrize("name", fixture_names())
def test_letta_fixture_imports_with_warnings_only_and_round_trips(client, name):
    (first,) = _import(client, fixture_path(name).read_bytes())
    exported = client.agents.export_file(first).encode()
    (second,) = _import(client, exported)
    a, b = client.agents.retrieve(first), client.agents.retrieve(second)
    assert [(x.label, x.value) for x in a.memory.blocks] == [(x.label, x.value) for x in b.memory.blocks]
    assert sorted(t.name for t in a.tools) == sorted(t.name for t in b.tools)
    assert [(r.type, r.tool_name) for r in a.tool_rules] == [(r.type, r.tool_name) for r in b.tool_rules]
    assert (a.system, a.model, len(a.message_ids)) == (b.system, b.model, len(b.message_ids))
    texts = lambda agent_id: list(
        Message.objects.filter(agent_id=agent_id).order_by("seq").values_list("role", "text", "created_at")
    )  # noqa: E731
    assert texts(first) == texts(second)


@pytest.mark.parametrize("name", fixture_names())
def test_letta_fixture_lists_its_messages_on_every_query(client, live_server, account, name):
    """Letta's agent files import and then list their messages with the SDK (the response schema holds every shape
    Letta stores: a tool return's stdout as a list, say), and no query of the list answers 500."""
    (agent_id,) = _import(client, fixture_path(name).read_bytes())
    listed = list(client.agents.messages.list(agent_id, order="asc", limit=1000))
    assert listed and not [m.id for m in listed if getattr(m, "kind", None) == "unrenderable"]
    assert listed == list(client.agents.messages.list(agent_id, order="asc", limit=7))  # every page, same shapes
    headers = {"Authorization": f"Bearer {account.token}"}
    for query in ("", "?order=desc", "?limit=1", "?use_assistant_message=false", "?include_err=true"):
        r = httpx.get(f"{live_server.url}/v1/agents/{agent_id}/messages{query}", headers=headers)
        assert r.status_code == 200, (query, r.text[:300])
