"""'Add to dataset' beside the conversation in the workspace: the form lists the agent's datasets, the conversation's
user turns become a case of a chosen or a new dataset with a link to it, refusals come back inline as 422s and
nothing is half-stored, another owner's agent is a 404."""

import pytest
from django.test import Client
from django.utils.html import escapejs

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
    assert empty.status_code == 422  # the form again, which htmx swaps in (data-swap-refusals)
    assert "no user turns" in empty.content.decode() and not Dataset.objects.filter(name="drinks").exists()
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Tea, as ever."}))
    sent = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "What do I drink?"}]})
    assert sent.status_code == 200, sent.content
    form = web.get(url).content.decode()
    assert "of another agent" not in form and 'value="new" selected' in form
    unnamed = web.post(url, {"dataset": "new", "new_name": "  "})
    assert unnamed.status_code == 422 and 'id="add-case-error"' in unnamed.content.decode()
    assert "Name the new dataset." in unnamed.content.decode() and "data-swap-refusals" in unnamed.content.decode()
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
    foreign = web.post(url, {"dataset": Dataset.objects.get(name="of another agent").id})
    assert foreign.status_code == 422 and "Choose a dataset, or name a new one." in foreign.content.decode()
    assert EvalCase.objects.filter(dataset__name="of another agent").count() == 0
    assert web.get(url + "?close=1").content == b""


def test_another_owners_agent_is_a_404(web, account, other_account):
    agent = make_agent(account.org)
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.get(f"/evals/agents/{agent.id}/add-case/").status_code == 404
    assert stranger.post(f"/evals/agents/{agent.id}/add-case/", {"dataset": "new", "new_name": "x"}).status_code == 404
    assert not Dataset.objects.exists()


def test_any_conversation_of_the_agent_goes_to_a_dataset_or_a_test(web, api, account, other_account, fake_llm):
    """From a conversation other than the agent's own thread, 'Add to dataset' and 'Save as test' take that
    conversation's user turns (not the own thread's); a conversation of another agent is a 404 everywhere."""
    agent, other = make_agent(account.org, name="barista"), make_agent(account.org, name="other")
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "Tea, as ever."}),
        FakeLLM.tool("send_message", {"message": "Coffee in this thread."}),
    )
    own = {"messages": [{"role": "user", "content": "In the own thread"}]}
    assert api.post(f"/v1/agents/{agent.id}/messages", own).status_code == 200
    thread = api.post(f"/v1/conversations/?agent_id={agent.id}", {"isolated_block_labels": []}).json()["id"]
    said = {"messages": [{"role": "user", "content": "What now?"}], "streaming": False}
    assert api.post(f"/v1/conversations/{thread}/messages", said).status_code == 200
    foreign = api.post(f"/v1/conversations/?agent_id={other.id}", {"isolated_block_labels": []}).json()["id"]

    page = web.get(f"/agents/{agent.id}/?conversation={thread}").content.decode()
    assert f'/evals/agents/{agent.id}/add-case/?conversation={thread}"' in page
    assert f"?from=conversation&amp;conversation={thread}" in page
    url = f"/evals/agents/{agent.id}/add-case/"
    form = web.get(url, {"conversation": thread}).content.decode()
    assert f'name="conversation" value="{thread}"' in form and "this conversation" in form
    web.post(url, {"dataset": "new", "new_name": "threads", "conversation": thread})
    [case] = EvalCase.objects.filter(dataset__name="threads")
    assert (case.turns, case.ground_truth, case.start) == (
        ["What now?"],
        "Coffee in this thread.",
        {"agent_id": agent.id},
    )
    assert web.get(url, {"conversation": foreign}).status_code == 404
    assert web.post(url, {"dataset": "new", "new_name": "x", "conversation": foreign}).status_code == 404

    drafted = web.get(f"/agents/{agent.id}/tests/form/", {"from": "conversation", "conversation": thread})
    body = drafted.content.decode()
    assert ">What now?</textarea>" in body and "In the own thread" not in body
    assert f'"conversation": "{escapejs(thread)}"' in body  # drafting from one of its runs stays in the thread
    assert (
        web.get(f"/agents/{agent.id}/tests/form/", {"from": "conversation", "conversation": foreign}).status_code == 404
    )

    dataset = Dataset.objects.get(name="threads")
    by_api = api.post(
        f"/v1/evals/datasets/{dataset.id}/cases/from-conversation", {"agent_id": agent.id, "conversation_id": thread}
    )
    assert by_api.status_code == 200 and by_api.json()["turns"] == ["What now?"]
    assert (
        api.post(
            f"/v1/evals/datasets/{dataset.id}/cases/from-conversation",
            {"agent_id": agent.id, "conversation_id": foreign},
        ).status_code
        == 404
    )
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.get(url, {"conversation": thread}).status_code == 404
