"""The rest of Letta's LETTA_TOOL_SET: `memory` and `memory_apply_patch` (letta_memory_core), `run_code` and
`run_code_with_tools` (letta_builtin, run in the tool sandbox) and the voice sleep-time tools
(letta_voice_sleeptime_core): installed with Letta's names, schemas and types, attached only when named, and what
they do when the model calls them."""

import json

import pytest
from django.db import transaction

from core.agents.context import agent_snapshot
from core.engine import memory_ops
from core.engine.base_tools import CODE_TOOL_NAMES, LETTA_TYPE_OF_BASE, MEMORY_TOOL_NAMES, VOICE_TOOL_NAMES
from core.models import Agent
from core.runs.runner import run_agent
from memory.models import Block, Passage
from memory.selectors import agent_blocks
from tests.fake_llm import FakeLLM
from tools.letta_tools import letta_tool_prepare
from tools.models import Tool
from tools.services import tool_attach, tool_create

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = {"name": "letta-tools", "model": "openai/fake-model", "context_window_limit": 16000}
NEW = (*MEMORY_TOOL_NAMES, *CODE_TOOL_NAMES, *VOICE_TOOL_NAMES)
SM = "send_message"


def _agent(api, *tools: str) -> Agent:
    body = {**AGENT, "tools": [*tools, SM], "include_base_tools": False}
    body["memory_blocks"] = [
        {"label": "human", "value": "Alice\nLikes tea", "limit": 200},
        {"label": "persona", "value": "A helper.", "limit": 200},
    ]
    made = api.post("/v1/agents/", body)
    assert made.status_code == 201, made.content
    return Agent.objects.get(pk=made.json()["id"])


def _send(agent: Agent, text: str = "go") -> dict:
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])
    return next(m for m in result.messages if m["message_type"] == "tool_return_message")


def _values(agent: Agent) -> dict[str, str]:
    return {b.label: b.value for b in agent_blocks(agent=agent)}


def test_they_install_with_letta_types_and_are_attached_only_when_named(api, account):
    tools = {t["name"]: t for t in api.post("/v1/tools/add-base-tools").json()}
    assert {n: tools[n]["tool_type"] for n in NEW} == {
        "memory": "letta_memory_core",
        "memory_apply_patch": "letta_memory_core",
        "run_code": "letta_builtin",
        "run_code_with_tools": "letta_builtin",
        "store_memories": "letta_voice_sleeptime_core",
        "rethink_user_memory": "letta_voice_sleeptime_core",
        "finish_rethinking_memory": "letta_voice_sleeptime_core",
        "search_memory": "letta_voice_sleeptime_core",
    }
    assert tools["run_code"]["json_schema"]["parameters"]["properties"]["language"]["enum"] == [
        "python",
        "js",
        "ts",
        "r",
        "java",
    ]
    listed = api.get("/v1/tools/?tool_types=letta_voice_sleeptime_core").json()
    assert sorted(t["name"] for t in listed) == sorted(VOICE_TOOL_NAMES)
    listed = api.get("/v1/tools/?tool_types=letta_core").json()
    assert not {t["name"] for t in listed} & set(LETTA_TYPE_OF_BASE)
    plain = api.post("/v1/agents/", {**AGENT, "name": "plain"}).json()
    assert not {t["name"] for t in plain["tools"]} & set(NEW)
    custom = api.post("/v1/tools/", {"source_code": "def memory(x: str) -> str:\n    '''Mine.'''\n    return x\n"})
    assert custom.status_code in (400, 409, 422)  # a built-in's name is reserved


def test_memory_tool_edits_a_block_through_a_step(api, account, fake_llm):
    agent = _agent(api, "memory", "memory_apply_patch", "rethink_user_memory")
    fake_llm.script(
        FakeLLM.tool(
            "memory",
            {"command": "str_replace", "path": "/memories/human", "old_string": "tea", "new_string": "coffee"},
            heartbeat=True,
        ),
        FakeLLM.tool("memory_apply_patch", {"label": "human", "patch": "@@\n-Alice\n+Alice Smith"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "noted"}),
    )
    ret = _send(agent)
    assert ret["status"] == "success", ret
    assert _values(agent)["human"] == "Alice Smith\nLikes coffee"
    fake_llm.script(
        FakeLLM.tool("rethink_user_memory", {"new_memory": "Alice Smith drinks coffee."}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "done"}),
    )
    assert _send(agent)["status"] == "success"
    assert _values(agent)["human"] == "Alice Smith drinks coffee."
    fake_llm.script(
        FakeLLM.tool("memory", {"command": "str_replace", "path": "human", "old_string": "tea", "new_string": "x"}),
        FakeLLM.tool(SM, {"message": "oops"}),
    )
    refused = _send(agent)
    assert refused["status"] == "error"
    assert "was not found" in refused["tool_return"] and _values(agent)["human"] == "Alice Smith drinks coffee."


def _apply(agent: Agent, name: str, args: dict, user_query: str = "") -> str:
    """One call as the step runs it: prepared on the step's snapshot, its write applied in a transaction."""
    snap = agent_snapshot(agent=agent)
    prepared = letta_tool_prepare(name=name, args=args, agent=agent, blocks=snap.blocks, user_query=user_query)
    if prepared.effect is not None:
        with transaction.atomic():
            prepared.effect()
    return prepared.value


def test_memory_tool_creates_renames_describes_and_deletes_blocks(api, account):
    agent = _agent(api, "memory", "memory_apply_patch")
    said = _apply(
        agent, "memory", {"command": "create", "path": "/memories/projects", "description": "Work", "file_text": "IDE"}
    )
    assert said.startswith("Successfully created memory block 'projects'.")
    created = Block.objects.get(agentblock__agent=agent, label="projects")
    assert (created.value, created.description, created.limit) == ("IDE", "Work", 100_000)
    _apply(agent, "memory", {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/work"})
    _apply(agent, "memory", {"command": "rename", "path": "/memories/work", "description": "Their work"})
    assert Block.objects.get(pk=created.pk).label == "work"
    assert Block.objects.get(pk=created.pk).description == "Their work"
    _apply(agent, "memory", {"command": "delete", "path": "/memories/work"})
    assert list(_values(agent)) == ["human", "persona"] and Block.objects.filter(pk=created.pk).exists()  # detached
    patch = "*** Add Block: notes\nDescription: Notes\n+one\n*** Update Block: human\n-Alice\n+Bob\n*** Move to: user"
    said = _apply(agent, "memory_apply_patch", {"label": "", "patch": patch})
    assert said.endswith("- Renamed memory block 'human' to 'user'")
    assert _values(agent) == {"user": "Bob\nLikes tea", "persona": "A helper.", "notes": "one"}
    with pytest.raises(memory_ops.MemoryEditError, match="already exists"):
        _apply(agent, "memory", {"command": "create", "path": "notes", "description": "again"})


def test_voice_tools_store_search_and_finish(api, account, fake_llm):
    agent = _agent(api, *VOICE_TOOL_NAMES)
    fake_llm.script(FakeLLM.tool(SM, {"message": "Your order 4411 ships Friday."}))
    run_agent(
        agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "Where is order 4411?"}]
    )
    chunk = {"start_index": 0, "end_index": 1, "context": "The user asked about order 4411; it ships Friday."}
    assert _apply(agent, "store_memories", {"chunks": [chunk]}) == ""
    stored = Passage.objects.get(agent=agent)
    assert stored.text.startswith("<memory><messages><message>user: Where is order 4411?</message>")
    assert "<context>The user asked about order 4411; it ships Friday.</context>" in stored.text
    found = json.loads(
        _apply(agent, "search_memory", {"convo_keyword_queries": ["4411"], "start_minutes_ago": None}, "order 4411")
    )
    assert found["archival_search_results"][0]["content"] == stored.text
    assert "Your order 4411 ships Friday." in found["convo_keyword_search_results"]["4411"]
    assert _apply(agent, "finish_rethinking_memory", {}) == ""


SQUARE = '''
def square(x: int) -> int:
    """Square a number.

    Args:
        x: The number.
    """
    return x * x
'''


def test_run_code_runs_in_the_sandbox_through_a_step(api, account, fake_llm):
    agent = _agent(api, "run_code", "run_code_with_tools")
    tool_attach(agent=agent, tool=tool_create(owner=account.org, source_code=SQUARE))
    fake_llm.script(
        FakeLLM.tool("run_code", {"code": "print('hi')\n6 * 7", "language": "python"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "42"}),
    )
    ret = _send(agent)
    assert ret["status"] == "success", ret
    assert json.loads(ret["tool_return"]) == {"results": ["42"], "logs": {"stdout": ["hi\n"], "stderr": []}}
    assert ret["sandbox"] and ret["sandbox"] != "in-process"
    fake_llm.script(
        FakeLLM.tool("run_code_with_tools", {"code": "square(square(3))"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "81"}),
    )
    ret = _send(agent)
    assert json.loads(ret["tool_return"]) == {"status": "success", "func_return": "81", "stdout": [], "stderr": []}
    fake_llm.script(
        FakeLLM.tool("run_code", {"code": "1/0", "language": "python"}, heartbeat=True),
        FakeLLM.tool("run_code", {"code": "x <- 1", "language": "r"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "no"}),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "go"}])
    returns = [json.loads(m["tool_return"]) for m in result.messages if m["message_type"] == "tool_return_message"]
    assert [r["error"]["name"] for r in returns] == ["ZeroDivisionError", "Unsupported"]
    assert Tool.objects.get(owner=account.org, name="run_code").source_code.startswith('"""The source of Letta')


def test_in_a_step_blocks_are_created_renamed_and_deleted_and_voice_tools_store_and_search(api, account, fake_llm):
    """Through the runner: Letta's `memory` tool creates, renames and deletes blocks (applied in the step's commit),
    store_memories writes archival memory the next step's search_memory finds, finish_rethinking_memory answers ''."""
    agent = _agent(api, "memory", "store_memories", "search_memory", "finish_rethinking_memory")
    fake_llm.script(
        FakeLLM.tool(
            "memory", {"command": "create", "path": "notes", "description": "Notes", "file_text": "a"}, heartbeat=True
        ),
        FakeLLM.tool("memory", {"command": "rename", "old_path": "notes", "new_path": "todo"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "done"}),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "go"}])
    returns = [m for m in result.messages if m["message_type"] == "tool_return_message"]
    assert [r["status"] for r in returns] == ["success", "success"], returns
    assert _values(agent)["todo"] == "a" and "notes" not in _values(agent)
    fake_llm.script(
        FakeLLM.tool("memory", {"command": "delete", "path": "todo"}, heartbeat=True),
        FakeLLM.tool("memory", {"command": "delete", "path": "todo"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "gone"}),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "again"}])
    returns = [m for m in result.messages if m["message_type"] == "tool_return_message"]
    assert [r["status"] for r in returns] == ["success", "error"], returns  # the second sees the first's delete
    assert sorted(_values(agent)) == ["human", "persona"]
    fake_llm.script(
        FakeLLM.tool(
            "store_memories", {"chunks": [{"start_index": 0, "end_index": 1, "context": "order 4411"}]}, heartbeat=True
        ),
        FakeLLM.tool("finish_rethinking_memory", {}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "stored"}),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "store"}])
    returns = [m for m in result.messages if m["message_type"] == "tool_return_message"]
    assert [r["status"] for r in returns] == ["success", "success"], returns
    assert Passage.objects.filter(agent=agent, text__contains="order 4411").count() == 1


def test_an_agent_file_keeps_them_with_letta_types(api, account):
    from core.agents.agentfile.exporter import agentfile_export
    from core.agents.agentfile.importer import ImportOptions, agentfile_import
    from core.agents.agentfile.parse import parse_agent_file

    agent = _agent(api, "run_code", "memory", "store_memories")
    data = agentfile_export(agent=agent)
    kinds = {t["name"]: t["tool_type"] for t in data["tools"]}
    assert (kinds["run_code"], kinds["memory"], kinds["store_memories"]) == (
        "letta_builtin",
        "letta_memory_core",
        "letta_voice_sleeptime_core",
    )
    result = agentfile_import(
        owner=account.org, parsed=parse_agent_file(json.dumps(data).encode()), options=ImportOptions()
    )
    copy = Agent.objects.get(pk=result.agent_ids[0])
    assert {"run_code", "memory", "store_memories"} <= {t.name for t in copy.tools.all()}
    assert not [w for w in result.warnings if "no equivalent" in w]
