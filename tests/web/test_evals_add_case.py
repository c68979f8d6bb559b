"""'Add to dataset' beside the conversation in the workspace: the form lists the agent's datasets, the conversation's
user turns become a case of a chosen or a new dataset with a link to it, refusals come back inline and nothing is
half-stored, another owner's agent is a 404."""

import pytest
from django.test import Client

from core.evals import datasets
from core.models import Dataset, EvalCase
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_conversation_goes_to_a_new_then_an_existing_dataset(web, api, account, fake_llm):
    agent = make_agent(account.org, name="barista")
    other = make_agent(account.org, name="other")
    datasets.dataset_create(owner=account.org, name="of another agent", agent_id=other.id)
    url = f"/evals/agents/{agent.id}/add-case/"
    assert 'id="add-to-dataset"' in web.get(f"/agents/{agent.id}/").content.decode()
    empty = web.post(url, {"dataset": "new", "new_name": "drinks"})
    assert "no user turns" in empty.content.decode() and not Dataset.objects.filter(name="drinks").exists()
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Tea, as ever."}))
    sent = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "What do I drink?"}]})
    assert sent.status_code == 200, sent.content
    form = web.get(url).content.decode()
    assert "of another agent" not in form and 'value="new" selected' in form
    unnamed = web.post(url, {"dataset": "new", "new_name": "  "}).content.decode()
    assert 'id="add-case-error"' in unnamed and "Name the new dataset." in unnamed
    added = web.post(url, {"dataset": "new", "new_name": "drinks <b>"}).content.decode()
    dataset = Dataset.objects.get(name="drinks <b>")
    assert dataset.agent_id == agent.id and dataset.graders == [{"name": "answer", "kind": "contains"}]
    assert f'href="/evals/datasets/{dataset.id}/"' in added and "drinks &lt;b&gt;" in added
    assert "drinks &lt;b&gt;</option>" in web.get(url).content.decode()
    web.post(url, {"dataset": dataset.id})
    cases = list(EvalCase.objects.filter(dataset=dataset).order_by("position"))
    assert [(c.turns, c.ground_truth, c.start) for c in cases] == [
        (["What do I drink?"], "Tea, as ever.", {"agent_id": agent.id})
    ] * 2
    web.post(url, {"dataset": dataset.id, "new_name": "typed"})  # a name typed makes a new dataset
    assert EvalCase.objects.filter(dataset__name="typed", dataset__agent=agent).count() == 1
    foreign = web.post(url, {"dataset": Dataset.objects.get(name="of another agent").id}).content.decode()
    assert "Choose a dataset, or name a new one." in foreign
    assert EvalCase.objects.filter(dataset__name="of another agent").count() == 0
    assert web.get(url + "?close=1").content == b""


def test_another_owners_agent_is_a_404(web, account, other_account):
    agent = make_agent(account.org)
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.get(f"/evals/agents/{agent.id}/add-case/").status_code == 404
    assert stranger.post(f"/evals/agents/{agent.id}/add-case/", {"dataset": "new", "new_name": "x"}).status_code == 404
    assert not Dataset.objects.exists()
