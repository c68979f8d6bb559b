"""Time travel pages: the replay comparison (overrides, results per model diffed against what the agent did, past
replays), "Fork here" with lineage both ways, costs per run and per agent, the calibrated context bar, and
another owner's steps and agents answering 404."""

import pytest
from django.template.defaultfilters import floatformat
from django.test import Client

from core import providers
from core.models import Agent, Message, Replay, Step
from memory.models import Block
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org, name="Ada")


def _turn(api, agent, fake_llm, text, *replies):
    fake_llm.script(*replies)
    body = api.post(f"/v1/agents/{agent.id}/messages", {"input": text}).json()
    assert body["stop_reason"]["stop_reason"] == "end_turn", body


@pytest.fixture
def step(api, agent, fake_llm):
    _turn(api, agent, fake_llm, "hello", FakeLLM.tool("send_message", {"message": "the <b>original</b> reply"}))
    return Step.objects.get(agent=agent)


def test_replay_page_offers_the_steps_state_as_overrides(web, agent, step):
    page = web.get(f"/agents/{agent.id}/steps/{step.id}/replay/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="block:human"' in html and "The user&#x27;s name is Alice." in html
    assert 'name="system"' in html and 'name="tools_remove" value="send_message"' in html
    assert 'value="openai/fake-model"' in html  # the models the owner's providers list
    listed = [m["handle"] for m in providers.models_list(owner=agent.owner)]
    embedders = [h for h in listed if "embedding" in h]
    assert embedders and not any(f'value="{h}"' in html for h in embedders)  # listed, but no replay target
    for message_id in step.state["message_ids"]:
        assert f'name="drop" value="{message_id}"' in html
    assert 'id="replay-empty"' in html


def test_replay_on_two_models_with_an_edited_block_shows_both_and_changes_nothing(web, agent, step, fake_llm):
    fake_llm.by_model = {
        "model-a": FakeLLM.tool("send_message", {"message": "<script>alert(1)</script> from a"}),
        "model-b": FakeLLM.text("plain <img src=x onerror=alert(2)> from b"),
    }
    blocks_before = list(Block.objects.filter(agentblock__agent=agent).values_list("id", "value", "version"))
    messages_before = Message.objects.filter(agent=agent).count()
    human = next(b for b in step.state["blocks"] if b["label"] == "human")
    response = web.post(
        f"/agents/{agent.id}/steps/{step.id}/replay/run/",
        {
            "models": ["openai/model-a"],
            "extra_models": "openai/model-b",
            "block:human": "The user's name is Bob.",
            "system": step.state["spec"]["system"],
            **{f"block:{b['label']}": b["value"] for b in step.state["blocks"] if b["label"] != "human"},
        },
    )
    assert response.status_code == 302
    replay = Replay.objects.get()
    assert response["Location"].endswith(f"/replay/?replay={replay.id}")
    # only what was edited is an override: the unchanged system prompt and blocks are not
    assert replay.overrides["blocks"] == {"human": "The user's name is Bob."} and replay.overrides["system"] is None
    assert human["value"] != "The user's name is Bob."
    assert all("Bob" in r["request"]["messages"][0]["content"] for r in replay.results)
    html = web.get(response["Location"]).content.decode()
    assert 'data-model="openai/model-a"' in html and 'data-model="openai/model-b"' in html
    # untrusted model text is escaped, never markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt; from a" in html and "<script>alert(1)" not in html
    assert "plain &lt;img src=x onerror=alert(2)&gt; from b" in html and "<img src=x" not in html
    assert "the &lt;b&gt;original&lt;/b&gt; reply" in html  # the actual column
    assert html.count("price unknown") >= 2 and 'class="textdiff replay-diff"' in html
    # the reopened replay shows its overrides: the block edited, the system prompt not
    assert 'data-edited-for="block:human">edited' in html and 'data-edited-for="system" hidden>' in html
    assert "The user&#x27;s name is Bob.</textarea>" in html
    assert list(Block.objects.filter(agentblock__agent=agent).values_list("id", "value", "version")) == blocks_before
    assert Message.objects.filter(agent=agent).count() == messages_before


def test_a_bad_override_is_shown_on_the_page_and_nothing_is_stored(web, agent, step):
    response = web.post(
        f"/agents/{agent.id}/steps/{step.id}/replay/run/", {"models": ["openai/fake-model"], "temperature": "9"}
    )
    assert response.status_code == 422 and "temperature must be between 0 and 2" in response.content.decode()
    response = web.post(
        f"/agents/{agent.id}/steps/{step.id}/replay/run/", {"models": ["openai/fake-model"], "drop": ["message-nope"]}
    )
    assert response.status_code == 422 and "were not in this step&#x27;s context" in response.content.decode()
    assert not Replay.objects.exists()


def test_past_replays_are_listed_and_reopen(web, agent, step, fake_llm):
    fake_llm.by_model = {"model-a": FakeLLM.text("first"), "model-b": FakeLLM.text("second")}
    for model in ("model-a", "model-b"):
        web.post(f"/agents/{agent.id}/steps/{step.id}/replay/run/", {"extra_models": f"openai/{model}"})
    first, second = Replay.objects.order_by("created_at")
    html = web.get(f"/agents/{agent.id}/steps/{step.id}/replay/").content.decode()
    assert f'data-replay="{first.id}"' in html and f'data-replay="{second.id}"' in html
    assert 'data-model="openai/model-b"' in html and 'data-model="openai/model-a"' not in html  # newest shown
    html = web.get(f"/agents/{agent.id}/steps/{step.id}/replay/?replay={first.id}").content.decode()
    assert 'data-model="openai/model-a"' in html and 'data-model="openai/model-b"' not in html
    assert web.get(f"/agents/{agent.id}/steps/{step.id}/replay/?replay=replay-nope").status_code == 404


def test_fork_here_opens_the_fork_and_lineage_shows_both_ways(web, agent, step):
    response = web.post(f"/agents/{agent.id}/steps/{step.id}/fork/", {"before": "0"})
    fork = Agent.objects.exclude(id=agent.id).get()
    assert response.status_code == 302 and response["Location"] == f"/agents/{fork.id}/"
    assert fork.metadata["forked_from"] == {
        "agent_id": agent.id,
        "step_id": step.id,
        "step_index": step.index,
        "before": False,
    }
    html = web.get(f"/agents/{fork.id}/").content.decode()
    assert 'id="forked-from"' in html and f'href="/agents/{agent.id}/"' in html and f"at step {step.index}" in html
    html = web.get(f"/agents/{agent.id}/").content.decode()
    assert 'id="forks"' in html and f'href="/agents/{fork.id}/"' in html
    web.post(f"/agents/{agent.id}/steps/{step.id}/fork/", {"before": "1"})
    assert Agent.objects.filter(metadata__forked_from__before=True).count() == 1


def test_inspector_offers_replay_and_fork_and_compares_token_counts(web, agent, step):
    html = web.get(f"/agents/{agent.id}/steps/{step.id}/").content.decode()
    assert (
        f'href="/agents/{agent.id}/steps/{step.id}/replay/"' in html
        and f'action="/agents/{agent.id}/steps/{step.id}/fork/"' in html
    )
    usage = step.usage
    diff = usage["prompt_tokens"] - usage["estimated_prompt_tokens"]
    assert f"ours {usage['estimated_prompt_tokens']} · provider {usage['prompt_tokens']}" in html
    assert f"({'+' if diff > 0 else ''}{diff})" in html
    assert "price unknown" in html  # fake-model has no price


def test_runs_show_tokens_and_cost_and_the_agent_its_totals(web, api, account, fake_llm):
    priced = make_agent(account.org, name="priced", model="openai/gpt-4o-mini")
    _turn(api, priced, fake_llm, "one", FakeLLM.tool("send_message", {"message": "a"}))
    step = Step.objects.get(agent=priced)
    html = web.get(f"/agents/{priced.id}/runs/").content.decode()
    cost = "$" + floatformat(step.usage["cost_usd"], "-6")
    assert 'class="num run-cost"' in html and cost in html and "price unknown" not in html
    assert 'id="agent-usage"' in html and f"{step.usage['total_tokens']} tokens" in html


def test_an_unpriced_model_says_price_unknown_not_zero(web, agent, step):
    html = web.get(f"/agents/{agent.id}/runs/").content.decode()
    assert "price unknown" in html and "$0" not in html


def test_the_context_bar_is_calibrated_once_steps_were_counted(web, agent, step):
    html = web.get(f"/agents/{agent.id}/context/").content.decode()
    ratio = step.usage["prompt_tokens"] / step.usage["estimated_prompt_tokens"]
    assert 'id="ctx-calibrated"' in html and 'id="ctx-raw"' in html
    assert f"×{round(ratio, 4)}" in html
    assert "tokens as counted, before calibration" in html  # the next request's parts show raw counts


def test_a_new_agent_has_no_calibration(web, agent):
    html = web.get(f"/agents/{agent.id}/context/").content.decode()
    assert 'id="ctx-calibrated"' not in html and "before calibration" not in html


def test_another_owners_step_and_agent_answer_404(web, agent, step, other_account):
    stranger = Client()
    stranger.force_login(other_account.user)
    theirs = make_agent(other_account.org, name="Mallory's")
    for url in (f"/agents/{agent.id}/steps/{step.id}/replay/",):
        assert stranger.get(url).status_code == 404
    assert stranger.post(f"/agents/{agent.id}/steps/{step.id}/replay/run/", {}).status_code == 404
    assert stranger.post(f"/agents/{agent.id}/steps/{step.id}/fork/", {}).status_code == 404
    # my step under their agent's URL is not theirs either
    assert stranger.get(f"/agents/{theirs.id}/steps/{step.id}/replay/").status_code == 404
    assert stranger.post(f"/agents/{theirs.id}/steps/{step.id}/fork/", {}).status_code == 404
    assert not Replay.objects.exists() and Agent.objects.count() == 2


def test_a_step_recorded_without_its_state_replays_only_as_sent_and_cannot_fork(web, agent, step):
    Step.objects.filter(id=step.id).update(state={})
    html = web.get(f"/agents/{agent.id}/steps/{step.id}/replay/").content.decode()
    assert "can be replayed only as it was sent" in html
    assert 'name="block:human"' not in html and 'id="replay-fork"' not in html
    assert 'id="step-fork"' not in web.get(f"/agents/{agent.id}/steps/{step.id}/").content.decode()
    response = web.post(f"/agents/{agent.id}/steps/{step.id}/fork/", {"before": "0"})
    assert response.status_code == 422 and "before steps kept their state" in response.content.decode()
    assert Agent.objects.count() == 1
    # as sent, on another model, still works
    assert (
        web.post(
            f"/agents/{agent.id}/steps/{step.id}/replay/run/", {"models": ["openai/fake-model"], "temperature": "0.2"}
        ).status_code
        == 302
    )
    assert Replay.objects.get().results[0]["request"]["temperature"] == 0.2


def test_a_model_no_provider_serves_is_a_failed_column_beside_the_others(web, agent, step):
    web.post(
        f"/agents/{agent.id}/steps/{step.id}/replay/run/",
        {"models": ["openai/fake-model"], "extra_models": "nowhere/model-x"},
    )
    html = web.get(f"/agents/{agent.id}/steps/{step.id}/replay/").content.decode()
    assert 'class="card replay-col failed" data-model="nowhere/model-x"' in html
    assert "is not served by a configured provider" in html
    assert 'class="card replay-col" data-model="openai/fake-model"' in html
