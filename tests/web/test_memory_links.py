"""Memory in the workspace: "Attach existing" is there on the first load and says who uses each block; a block's
history links an agent's edit to the step and tool call that made it."""

from core.models import Step
from memory import services as memory_services
from memory.models import Block, BlockHistory
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def test_attach_existing_is_on_the_first_load_and_names_the_blocks_users(web, account):
    ada = make_agent(account.org, name="Ada")
    bob = make_agent(account.org, name="Bob <i>")
    shared = memory_services.block_create(owner=account.org, label="policies", value="Refunds within 30 days.")
    memory_services.block_attach(agent=bob, block=shared)
    loose = memory_services.block_create(owner=account.org, label="scratch", value="")
    page = web.get(f"/agents/{ada.id}/").content.decode()
    assert 'id="attach-existing"' in page
    assert f'<option value="{shared.id}" title="Refunds within 30 days.">policies — used by Bob &lt;i&gt; — ' in page
    assert f'<option value="{loose.id}" title="">scratch — used by no agent — ' in page
    persona = Block.objects.get(agentblock__agent=ada, label="persona")
    assert f'<option value="{persona.id}"' not in page  # its own blocks are not offered
    # the same list after an htmx refresh of the panel
    panel = web.get(f"/agents/{ada.id}/blocks/").content.decode()
    assert "policies — used by Bob &lt;i&gt;" in panel


def test_history_links_an_agents_edit_to_its_step_and_tool_call(web, account, fake_llm):
    from core.runs.runner import run_agent

    agent = make_agent(account.org, name="Ada")
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Loves oolong tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "I love oolong"}])
    entry = BlockHistory.objects.get(agent_id=agent.id, actor_type="agent")
    step = Step.objects.get(id=entry.step_id)
    assert step.agent_id == agent.id and entry.tool_call_id
    page = web.get(f"/blocks/{entry.block_id}/").content.decode()
    assert (
        f'<a class="history-step" href="/agents/{agent.id}/#step={step.id}&amp;call={entry.tool_call_id}">'
        f"step, tool call <code>{entry.tool_call_id}</code></a>"
    ) in page
