"""A context read compiles again only when something it is compiled from changed (core/agents/context.py keeps each
thread's last compiled context with its inputs, and the API's JSON of it): every edit of the agent, its blocks, its
tools, its rules or its messages is seen by the next read. And the API's answer, encoded by us, is the documented
schema's."""

import pytest

from core.agents import context as context_module
from core.agents.context import CompiledMemo, agent_context, agent_snapshot, agent_with_counts
from core.api.schemas import ContextWindowOut
from core.engine import types as t
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)  # sends run on the run pool's threads

TOOL_SOURCE = '''
def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: What to say.
    """
    return text.upper()
'''


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def _context(api, agent) -> dict:
    r = api.get(f"/v1/agents/{agent.id}/context")
    assert r.status_code == 200, r.content
    return r.json()


def test_the_answer_is_the_schemas_own(api, agent, fake_llm):
    api.post(f"/v1/agents/{agent.id}/messages", {"input": "hi"})
    body = _context(api, agent)
    assert ContextWindowOut.model_validate(body).model_dump(mode="json") == body  # nothing missing, nothing extra
    assert body["messages"] == body["request"]["messages"] and len(body["messages"]) > 1


def test_an_unchanged_agent_is_not_compiled_again(account, agent):
    first = agent_context(agent=agent_with_counts(owner=account.org, agent_id=agent.id))
    assert agent_context(agent=agent_with_counts(owner=account.org, agent_id=agent.id)) is first
    preview = agent_context(agent=agent_with_counts(owner=account.org, agent_id=agent.id), system="Be brief.")
    assert preview is not first and preview.section("system").text == "Be brief."


def test_every_edit_is_seen_by_the_next_read(api, agent, fake_llm):
    a = f"/v1/agents/{agent.id}"
    before = _context(api, agent)
    assert _context(api, agent) == before

    assert api.patch(a, {"system": "You are a pirate."}).status_code == 200
    ctx = _context(api, agent)
    assert ctx["system_prompt"].startswith("You are a pirate.")

    assert api.patch(f"{a}/core-memory/blocks/human", {"value": "The user is Bob."}).status_code == 200
    ctx = _context(api, agent)
    assert "The user is Bob." in ctx["core_memory"] and "Alice" not in ctx["core_memory"]

    tool = api.post("/v1/tools/", {"source_code": TOOL_SOURCE}).json()
    assert api.patch(f"{a}/tools/attach/{tool['id']}").status_code == 200
    ctx = _context(api, agent)
    assert "shout" in ctx["allowed_tools"]
    assert api.patch(f"/v1/tools/{tool['id']}", {"description": "Say it much louder."}).status_code == 200
    ctx = _context(api, agent)
    shout = next(d for d in ctx["functions_definitions"] if d["function"]["name"] == "shout")
    assert shout["function"]["description"] == "Say it much louder."

    rule = {"type": "exit_loop", "tool_name": "shout"}
    assert api.patch(a, {"tool_rules": [rule]}).status_code == 200
    ctx = _context(api, agent)
    assert "shout" in ctx["system_prompt"] and ctx["system_prompt"] != before["system_prompt"]

    assert api.post(f"{a}/archival-memory", {"text": "cats purr"}).status_code == 200
    ctx = _context(api, agent)
    assert ctx["num_archival_memory"] == before["num_archival_memory"] + 1

    fake_llm.script(FakeLLM.tool("send_message", {"message": "Arr, hello!"}))
    assert api.post(f"{a}/messages", {"input": "ahoy"}).status_code == 200
    ctx = _context(api, agent)
    assert ctx["num_messages"] > before["num_messages"] and "ahoy" in str(ctx["messages"])
    assert "Arr, hello!" in str(ctx["messages"])

    assert api.patch(f"{a}/tools/detach/{tool['id']}").status_code == 200
    assert "shout" not in _context(api, agent)["allowed_tools"]


def test_a_window_of_the_same_ids_takes_the_earlier_snapshots_messages(api, account, agent, fake_llm):
    api.post(f"/v1/agents/{agent.id}/messages", {"input": "hi"})
    first = agent_snapshot(agent=agent_with_counts(owner=account.org, agent_id=agent.id))
    again = agent_snapshot(agent=agent_with_counts(owner=account.org, agent_id=agent.id), prior=first)
    assert again.body is first.body and again.stats == first.stats and again.body
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello again!"}))
    api.post(f"/v1/agents/{agent.id}/messages", {"input": "once more"})
    later = agent_snapshot(agent=agent_with_counts(owner=account.org, agent_id=agent.id), prior=first)
    assert later.body[: len(first.body)] == first.body and len(later.body) > len(first.body)
    assert "Hello again!" in str([m.to_openai() for m in later.body])


def _compiled(tokens: int) -> t.CompiledContext:
    return t.CompiledContext(sections=(), request={}, total_tokens=tokens, context_window=1000, tokenizer="x")


def test_the_memo_keeps_what_its_budget_holds_the_least_recently_read_dropped_first():
    size = context_module.ENTRY_BYTES + 3 * context_module.BYTES_PER_TOKEN * 100
    memo = CompiledMemo(budget=3 * size)
    for n in range(3):
        memo.put(("agent", n), (n,), _compiled(100), snap=None)
    assert memo.get(("agent", 0), (0,)) is not None  # read: now the most recent
    assert memo.get(("agent", 2), ("other inputs",)) is None  # inputs that differ: not this context
    memo.put(("agent", 3), (3,), _compiled(100), snap=None)
    assert [memo.get(("agent", n), (n,)) is not None for n in range(4)] == [True, False, True, True]
    assert (len(memo), memo.bytes) == (3, 3 * size)


def test_a_body_counts_for_its_length_and_belongs_to_its_context():
    memo = CompiledMemo(budget=1_000_000)
    ctx = _compiled(10)
    memo.put(("agent", None), (), ctx, snap=None)
    memo.put_body(("agent", None), _compiled(10), b"{}")  # another context's: not kept
    assert memo.body(("agent", None), ctx) is None
    memo.put_body(("agent", None), ctx, b"x" * 2_000_000)  # more than the whole budget: the only entry stays
    assert memo.body(("agent", None), ctx) == b"x" * 2_000_000
    memo.put(("other", None), (), _compiled(10), snap=None)
    assert len(memo) == 1 and memo.get(("agent", None), ()) is None


def test_a_folder_agents_files_are_read_from_the_columns_its_context_reads(api, account, fake_llm):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from core.models import Agent
    from memory.files import services
    from memory.files.ingest import file_ingest
    from tests.memory.test_folders import pdf_bytes, upload

    folder = services.folder_create(owner=account.org, name="docs", instructions="Cite the page.")
    assert file_ingest(file_id=upload(folder, "harbour.pdf", pdf_bytes(2)).id) == "completed"
    agent = make_agent(account.org, name="Reader", agent_type="letta_v1_agent")
    assert "<directories>" not in _context(api, agent)["messages"][0]["content"]
    assert api.patch(f"/v1/agents/{agent.id}/folders/attach/{folder.id}").status_code == 200
    with CaptureQueriesContext(connection) as statements:
        ctx = _context(api, agent)
    assert '<file status="open" name="docs/harbour.pdf">' in ctx["messages"][0]["content"]
    table = Agent._meta.db_table
    assert len([s for s in statements if f'FROM "{table}"' in s["sql"]]) == 1  # no deferred column read later
    assert api.patch(f"/v1/agents/{agent.id}/folders/detach/{folder.id}").status_code == 200
    assert "<directories>" not in _context(api, agent)["messages"][0]["content"]
