"""An agent reads its documents: attaching a folder gives it the file tools and a files section in its context;
the fake model greps, opens and searches a multi-page PDF and answers from the right page; the simulator shows the
files section with its tokens; detaching the last folder takes the tools and the section away."""

import json

from core.agents.context import agent_context
from core.runs.runner import run_agent
from memory.files.ingest import file_ingest
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.memory.test_folders import pdf_bytes, upload

FILE_TOOLS = {"open_files", "grep_files", "semantic_search_files"}


def _system(request: dict) -> str:
    return request["messages"][0]["content"]


def _tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_an_agent_greps_opens_and_searches_its_pdf_and_answers_from_the_right_page(api, account, fake_llm):
    from memory.files import services

    folder = services.folder_create(owner=account.org, name="docs", instructions="Cite the page.")
    pdf = upload(folder, "harbour.pdf", pdf_bytes(5))
    assert file_ingest(file_id=pdf.id) == "completed"
    agent = make_agent(account.org, name="Reader", agent_type="letta_v1_agent")

    attached = api.patch(f"/v1/agents/{agent.id}/folders/attach/{folder.id}")
    assert attached.status_code == 200, attached.content
    tools = {t["name"]: t for t in attached.json()["tools"]}
    assert set(tools) >= FILE_TOOLS and {tools[n]["tool_type"] for n in FILE_TOOLS} == {"letta_files_core"}

    ctx = agent_context(agent=agent)
    files = next(s for s in ctx.sections if s.name == "files")
    assert files.tokens > 0 and '<file status="open" name="docs/harbour.pdf">' in files.text
    assert "<instructions>Cite the page.</instructions>" in files.text

    fake_llm.script(
        FakeLLM.tool("grep_files", {"pattern": "lighthouse number 21"}),
        FakeLLM.tool("open_files", {"file_requests": [{"file_name": "docs/harbour.pdf", "offset": 0, "length": 3}]}),
        FakeLLM.tool("semantic_search_files", {"query": "keeper lighthouse number 28"}),
        FakeLLM.text("Page 3: the lighthouse number is 21."),
    )
    result = run_agent(
        agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Which page?"}]
    )
    assert result.status == "completed", result.error
    requests = fake_llm.chat_requests
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= FILE_TOOLS
    grep, opened, searched = (json.loads(_tool_results(requests[i])[-1])["message"] for i in (1, 2, 3))
    assert "Found 1 total matches across 1 files" in grep and "> " in grep and "lighthouse number 21" in grep
    assert opened.startswith("* Opened docs/harbour.pdf (lines 1-3)")
    assert "lighthouse number 28" in searched and "docs/harbour.pdf (passage #1)" in searched
    # after open_files the files section holds the window it asked for
    assert "[Viewing lines 1 to 3" in _system(requests[2]) and "Chapter 1" in _system(requests[2])
    answer = [m for m in result.messages if m["message_type"] == "assistant_message"][-1]
    assert "Page 3" in answer["content"]

    bad = FakeLLM.tool("open_files", {"file_requests": [{"file_name": "docs/missing.pdf"}]})
    fake_llm.script(bad, FakeLLM.text("It is not there."))
    run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Open it"}])
    refused = json.loads(_tool_results(fake_llm.chat_requests[-1])[-1])
    assert refused["status"] == "Failed" and "docs/missing.pdf not attached" in refused["message"]

    detached = api.patch(f"/v1/agents/{agent.id}/folders/detach/{folder.id}")
    assert detached.status_code == 200
    assert not FILE_TOOLS & {t["name"] for t in detached.json()["tools"]}
    files = next(s for s in agent_context(agent=agent).sections if s.name == "files")
    assert files.tokens == 0 and files.text == ""
