"""Templates agree with themselves: each states its agent type, the new-agent form follows it unless told otherwise,
and an agent of another type than the template's gets that type's base prompt (no prompt telling a letta_v1_agent
that send_message is its only voice); the page describes each template's tools and blocks."""

import pytest

from core.agents.agentfile import templates
from core.agents.services import DEFAULT_SYSTEM, DEFAULT_SYSTEM_V1
from core.models import Agent
from tools.selectors import agent_tools

pytestmark = pytest.mark.django_db


def _create(web, name, template, agent_type=""):
    r = web.post(
        "/agents/new/", {"name": name, "template": template, "model": "openai/gpt-4o-mini", "agent_type": agent_type}
    )
    assert r.status_code == 302, r.content
    return Agent.objects.get(name=name)


@pytest.mark.parametrize("entry", templates.templates_list(), ids=lambda t: t["name"])
def test_each_template_as_itself_keeps_its_type_prompt_and_tools(web, account, entry):
    agent = _create(web, f"as-{entry['name']}", f"af:{entry['name']}")
    assert agent.agent_type == entry["agent_type"]
    names = {t.name for t in agent_tools(agent=agent)}
    if "send_message" in agent.system:  # a prompt that names send_message comes with it, and with a type that uses it
        assert "send_message" in names and agent.agent_type != "letta_v1_agent"
    assert set(entry["tools"]) <= names


@pytest.mark.parametrize("name", ["blank", "memgpt_chat"])
def test_another_type_than_the_templates_takes_that_types_base_prompt(web, account, name):
    agent = _create(web, f"v1-{name}", f"af:{name}", "letta_v1_agent")
    assert agent.agent_type == "letta_v1_agent" and agent.system == DEFAULT_SYSTEM_V1
    assert "send_message" not in {t.name for t in agent_tools(agent=agent)}
    assert "send_message" not in agent.system


def test_the_form_defaults_to_the_templates_type_and_describes_every_template(web, account):
    page = web.get("/").content.decode()
    assert '<option value="" selected>as the template says</option>' in page
    for entry in templates.templates_list():
        assert entry["title"] in page and entry["description"][:40].replace("'", "&#x27;") in page
    assert "Memory blocks:" in page and "<code>send_message</code>" in page
    assert DEFAULT_SYSTEM != DEFAULT_SYSTEM_V1
