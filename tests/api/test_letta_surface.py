"""The rest of Letta's v1 surface its clients call, through the API: message search and the organization-wide
message list, passage search, tags, steps, compaction settings and summarize, recompile, the model list, and
the JSON 404 for Letta routes this server does not serve. Each with its filters, another account's view, and bad
input."""

import pytest

from core.agents.conversations import conversation_create
from core.models import Agent, Message, Run, Step
from core.runs import executor
from core.runs.overflow import agent_compact
from core.runs.request import RunRequest
from core.runs.runner import run_agent
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM

# Runs execute on the run pool's own threads and connections: the data they read must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


def _say(agent, text: str, fake_llm, reply: str = "noted"):
    fake_llm.script(FakeLLM.tool("send_message", {"message": reply}))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])
    assert result.stop_reason == "end_turn", result.error
    return result


@pytest.fixture
def harbour(account, fake_llm):
    """An agent that heard about the harbour and replied, and another that heard about mountains."""
    one = make_agent(account.org, name="one", tags=["sea", "boats"], model_settings={"put_inner_thoughts": True})
    two = make_agent(account.org, name="two", tags=["hills"])
    _say(one, "We sailed out of the harbour at dawn", fake_llm, reply="The harbour sounds lovely")
    _say(two, "We walked up the mountain", fake_llm, reply="Mountains are tall")
    return one, two


# --------------------------------------------------------------------------- POST /v1/messages/search


def test_search_finds_messages_across_the_callers_agents(api, harbour):
    one, two = harbour
    found = api.post("/v1/messages/search", {"query": "harbour"}).json()
    # the assistant's message gives two results: its reasoning and its reply
    assert {r["message_type"] for r in found} == {"user_message", "reasoning_message", "assistant_message"}
    user = next(r for r in found if r["message_type"] == "user_message")
    assert user["content"] == "We sailed out of the harbour at dawn"
    assert user["agent_id"] == one.id and user["conversation_id"] is None and user["created_at"]
    assert Message.objects.get(pk=user["message_id"]).agent_id == one.id
    assert api.post("/v1/messages/search", {"query": "HARBOUR dawn", "search_mode": "fts"}).json()
    assert {r["agent_id"] for r in api.post("/v1/messages/search", {"query": "mountain"}).json()} == {two.id}


def test_search_filters_by_agent_thread_dates_and_limit(api, account, harbour, fake_llm):
    one, two = harbour
    assert api.post("/v1/messages/search", {"query": "harbour", "agent_id": two.id}).json() == []
    assert api.post("/v1/messages/search", {"query": "harbour", "agent_id": one.id}).json()
    assert len(api.post("/v1/messages/search", {"query": "harbour", "limit": 1}).json()) == 1
    assert api.post("/v1/messages/search", {"query": "harbour", "conversation_id": "default"}).json()
    conv = conversation_create(agent=one)
    assert api.post("/v1/messages/search", {"query": "harbour", "conversation_id": conv.id}).json() == []
    past = {"query": "harbour", "end_date": "2001-01-01T00:00:00Z"}
    assert api.post("/v1/messages/search", past).json() == []
    future = {"query": "harbour", "start_date": "2999-01-01T00:00:00Z"}
    assert api.post("/v1/messages/search", future).json() == []


def test_search_without_full_text_matches_every_term(api, harbour, monkeypatch):
    monkeypatch.setattr("core.agents.recall.fulltext_available", lambda connection: False)
    found = api.post("/v1/messages/search", {"query": "harbour DAWN"}).json()
    assert [r["content"] for r in found] == ["We sailed out of the harbour at dawn"]
    assert api.post("/v1/messages/search", {"query": "harbour mountain"}).json() == []


def test_search_is_the_callers_own_and_refuses_bad_input(api, harbour, other_account):
    one, _ = harbour
    other = ApiClient(other_account.token)
    assert other.post("/v1/messages/search", {"query": "harbour"}).json() == []
    assert other.post("/v1/messages/search", {"query": "harbour", "agent_id": one.id}).json() == []
    assert api.post("/v1/messages/search", {}).status_code == 422
    assert api.post("/v1/messages/search", {"query": "x", "limit": 0}).status_code == 422
    assert api.post("/v1/messages/search", {"query": "x", "search_mode": "magic"}).status_code == 422
    assert api.post("/v1/messages/search", {"query": "x", "end_date": "yesterday"}).status_code == 422


def test_cache_warm_answers_as_letta_does(api):
    r = api.post("/v1/_internal_search/cache-warm", {"collection": "messages", "scope": {}})
    assert r.status_code == 202 and r.json() == {"collection": "messages", "status": "ok", "warmed": True}


# --------------------------------------------------------------------------- GET /v1/messages/ and /{id}


def test_all_messages_list_pages_as_letta(api, harbour):
    one, two = harbour
    everything = api.get("/v1/messages/?order=asc&limit=1000").json()
    ids = list(dict.fromkeys(m["id"] for m in everything))
    assert len(ids) == Message.objects.exclude(role="tool").count()
    newest = api.get("/v1/messages/?limit=2").json()  # desc: the newest two, handed back oldest first
    assert list(dict.fromkeys(m["id"] for m in newest)) == ids[-2:]
    assert api.get(f"/v1/messages/?after={ids[-1]}").json() == []  # nothing newer: the SDK's paging stops
    older = api.get(f"/v1/messages/?before={ids[-2]}&limit=1").json()
    assert {m["id"] for m in older} == {ids[-3]}
    newer = api.get(f"/v1/messages/?order=asc&after={ids[0]}&limit=1").json()
    assert {m["id"] for m in newer} == {ids[1]}
    users = api.get("/v1/messages/?include_return_message_types=user_message").json()
    assert {m["message_type"] for m in users} == {"user_message"} and len(users) == 2
    assert api.get("/v1/messages/?after=message-nope").status_code == 404


def test_all_messages_list_filters_by_thread_and_is_the_callers_own(api, harbour, other_account):
    one, _ = harbour
    conv = conversation_create(agent=one)
    in_conv = api.get(f"/v1/messages/?conversation_id={conv.id}").json()
    assert [m["message_type"] for m in in_conv] == ["system_message"]
    assert all(m["id"] != in_conv[0]["id"] for m in api.get("/v1/messages/?conversation_id=default").json())
    other = ApiClient(other_account.token)
    assert other.get("/v1/messages/").json() == []
    assert other.get(f"/v1/messages/?after={in_conv[0]['id']}").status_code == 404


def test_one_message_is_its_parts_last_first(api, account, fake_llm, other_account):
    agent = make_agent(account.org, agent_type="memgpt_v2_agent")
    fake_llm.script(
        FakeLLM.reasoning("Let me look.", "conversation_search", {"query": "x"}),
        FakeLLM.tool("send_message", {"message": "done"}),
    )
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    row = Message.objects.filter(agent=agent, role="assistant").order_by("seq").first()
    parts = api.get(f"/v1/messages/{row.id}").json()
    assert [p["message_type"] for p in parts] == ["tool_call_message", "reasoning_message"]
    assert {p["id"] for p in parts} == {row.id}
    assert api.get("/v1/messages/message-missing").status_code == 404
    assert ApiClient(other_account.token).get(f"/v1/messages/{row.id}").status_code == 404


def test_agent_messages_filter_by_conversation(api, harbour):
    one, _ = harbour
    conv = conversation_create(agent=one)
    base = f"/v1/agents/{one.id}/messages?order=asc"
    everything = api.get(base).json()
    own = api.get(f"{base}&conversation_id=default").json()
    theirs = api.get(f"{base}&conversation_id={conv.id}").json()
    assert [m["message_type"] for m in theirs] == ["system_message"]
    assert len(own) + len(theirs) == len(everything)
    assert theirs[0]["id"] not in {m["id"] for m in own}


# --------------------------------------------------------------------------- POST /v1/passages/search


@pytest.fixture
def passages(api, harbour):
    one, two = harbour
    for agent, text, tags in (
        (one, "The lighthouse keeper waves at boats", ["sea", "people"]),
        (one, "Boats need paint every spring", ["sea"]),
        (two, "The summit was cold and windy", ["hills"]),
    ):
        assert api.post(f"/v1/agents/{agent.id}/archival-memory", {"text": text, "tags": tags}).status_code == 200
    return one, two


def test_passage_search_in_one_agent_or_all(api, passages):
    one, two = passages
    hits = api.post("/v1/passages/search", {"query": "boats", "agent_id": one.id}).json()
    assert {h["passage"]["text"] for h in hits} == {
        "The lighthouse keeper waves at boats",
        "Boats need paint every spring",
    }
    assert all(h["score"] > 0 and h["metadata"] == {} and h["passage"]["id"].startswith("passage-") for h in hits)
    everywhere = api.post("/v1/passages/search", {"query": "summit boats"}).json()
    assert {h["passage"]["agent_id"] for h in everywhere} == {one.id, two.id}
    assert api.post("/v1/passages/search", {"query": "summit", "agent_id": one.id}).json() == []


def test_passage_search_filters_by_tags_and_lists_without_a_query(api, passages):
    one, _ = passages
    any_tag = api.post("/v1/passages/search", {"tags": ["people", "hills"]}).json()
    assert {h["passage"]["text"] for h in any_tag} == {
        "The lighthouse keeper waves at boats",
        "The summit was cold and windy",
    }
    all_tags = api.post("/v1/passages/search", {"tags": ["sea", "people"], "tag_match_mode": "all"}).json()
    assert [h["passage"]["text"] for h in all_tags] == ["The lighthouse keeper waves at boats"]
    newest = api.post("/v1/passages/search", {"agent_id": one.id, "limit": 1}).json()
    assert [h["passage"]["text"] for h in newest] == ["Boats need paint every spring"] and newest[0]["score"] == 0


def test_passage_search_over_folder_passages_answers_them_with_no_agent(api, account, passages):
    """A folder's passages belong to no agent (Letta's Passage.agent_id is optional): the search answers them too,
    with their file, instead of failing on the missing agent."""
    from memory.files import services
    from memory.files.ingest import file_ingest

    folder = services.folder_create(owner=account.org, name="harbour")
    file, _ = services.file_upload(folder=folder, file_name="tides.txt", content_type=None, data=b"tides and boats")
    assert file_ingest(file_id=file.id) == "completed"
    for body in ({"query": "tides"}, {}):
        r = api.post("/v1/passages/search", body)
        assert r.status_code == 200, r.content
        [hit] = [h["passage"] for h in r.json() if h["passage"]["text"] == "tides and boats"]
        assert (hit["agent_id"], hit["file_id"], hit["source"]) == (None, file.id, "file")


def test_passage_search_is_the_callers_own_and_refuses_bad_input(api, passages, other_account):
    one, _ = passages
    other = ApiClient(other_account.token)
    assert other.post("/v1/passages/search", {"query": "boats"}).json() == []
    assert other.post("/v1/passages/search", {"query": "boats", "agent_id": one.id}).status_code == 404
    assert api.post("/v1/passages/search", {"archive_id": "archive-x"}).status_code == 404
    assert api.post("/v1/passages/search", {"limit": 101}).status_code == 422
    assert api.post("/v1/passages/search", {"tag_match_mode": "some"}).status_code == 422


# --------------------------------------------------------------------------- GET /v1/tags/ and /v1/steps/


def test_tags_are_sorted_distinct_filtered_and_paged(api, account, other_account):
    make_agent(account.org, name="a", tags=["sea", "boats"])
    make_agent(account.org, name="b", tags=["sea", "hills"])
    make_agent(other_account.org, name="c", tags=["secret"])
    assert api.get("/v1/tags/").json() == ["boats", "hills", "sea"]
    assert api.get("/v1/tags/?order=desc").json() == ["sea", "hills", "boats"]
    assert api.get("/v1/tags/?name=EA").json() == ["sea"]
    assert api.get("/v1/tags/?query_text=il").json() == ["hills"]
    assert api.get("/v1/tags/?after=boats&limit=1").json() == ["hills"]
    assert api.get("/v1/tags/?before=sea").json() == ["boats", "hills"]
    assert ApiClient(other_account.token).get("/v1/tags/").json() == ["secret"]
    assert api.get("/v1/tags/?order=sideways").status_code == 422


def test_steps_list_newest_first_with_letta_filters(api, harbour, other_account):
    one, two = harbour
    steps = api.get("/v1/steps/").json()
    assert [s["agent_id"] for s in steps] == [two.id, one.id]  # newest first
    assert api.get("/v1/steps/?order=asc").json() == steps  # as in Letta, whatever the order asked for
    assert [s["agent_id"] for s in api.get(f"/v1/steps/?agent_id={one.id}").json()] == [one.id]
    assert len(api.get("/v1/steps/?model=fake-model").json()) == 2
    assert api.get("/v1/steps/?model=other-model").json() == []
    assert api.get("/v1/steps/?feedback=positive").json() == []
    assert api.get("/v1/steps/?has_feedback=true").json() == []
    assert api.get("/v1/steps/?end_date=2001-01-01").json() == []
    assert [s["id"] for s in api.get(f"/v1/steps/?after={steps[0]['id']}").json()] == [steps[1]["id"]]
    assert api.get("/v1/steps/?after=step-missing").status_code == 404
    assert ApiClient(other_account.token).get("/v1/steps/").json() == []
    assert api.get("/v1/steps/?start_date=not-a-date").status_code == 422


def test_a_step_has_letta_fields_and_ours(api, harbour, other_account):
    one, _ = harbour
    step = Step.objects.filter(agent=one).get()
    body = api.get(f"/v1/steps/{step.id}").json()
    assert body["status"] == "success" and body["organization_id"] == one.owner_id
    assert body["model_handle"] == step.model and body["provider_name"] == "openai"
    assert body["messages"] == [] and body["feedback"] is None and body["error_type"] is None
    assert body["request"]["messages"] and body["prompt_tokens"] > 0  # our record's fields stay
    run_steps = api.get(f"/v1/runs/{step.run_id}/steps").json()
    assert [s["id"] for s in run_steps] == [step.id] and run_steps[0]["status"] == "success"
    assert ApiClient(other_account.token).get(f"/v1/steps/{step.id}").status_code == 404


# --------------------------------------------------------------------------- compaction settings, summarize


def test_compaction_settings_are_created_replaced_and_listed(api):
    created = api.post(
        "/v1/agents/",
        {"name": "compact", "model": "openai/fake-model", "compaction_settings": {"mode": "all"}},
    )
    assert created.status_code == 201, created.content
    settings = created.json()["compaction_settings"]
    assert settings["mode"] == "all" and settings["model"] == "openai/fake-model"  # null: the agent's own
    assert settings["sliding_window_percentage"] == 0.3 and settings["clip_chars"] == 50000
    agent_id = created.json()["id"]
    assert api.get(f"/v1/agents/{agent_id}").json()["compaction_settings"] == settings
    replaced = api.patch(f"/v1/agents/{agent_id}", {"compaction_settings": {"model": "openai/other"}}).json()
    assert replaced["compaction_settings"]["mode"] == "sliding_window"  # the whole object, not a merge
    assert replaced["compaction_settings"]["model"] == "openai/other"
    assert api.patch(f"/v1/agents/{agent_id}", {"name": "renamed"}).json()["compaction_settings"]["model"]
    assert api.patch(f"/v1/agents/{agent_id}", {"compaction_settings": None}).json()["compaction_settings"] is None
    plain = api.post("/v1/agents/", {"name": "plain", "model": "openai/fake-model"}).json()
    assert plain["compaction_settings"] is None
    bad = {"name": "bad", "compaction_settings": {"mode": "most"}}
    assert api.post("/v1/agents/", bad).status_code == 422
    bad = {"compaction_settings": {"sliding_window_percentage": 2}}
    assert api.patch(f"/v1/agents/{agent_id}", bad).status_code == 422


def test_summarize_compacts_the_window_into_one_summary(api, account, fake_llm):
    agent = make_agent(account.org)
    for i in range(4):
        _say(agent, f"Turn {i}: remember marker{i}", fake_llm)
    before = len(Agent.objects.get(pk=agent.pk).message_ids)
    fake_llm.script(FakeLLM.text("We talked about four markers."))
    r = api.post(f"/v1/agents/{agent.id}/summarize", {})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["summary"] == "We talked about four markers." and body["num_messages_before"] == before
    window = Agent.objects.get(pk=agent.pk).message_ids
    assert body["num_messages_after"] == len(window) < before
    summary = Message.objects.get(pk=window[1])
    assert summary.kind == "summary" and "We talked about four markers." in summary.text
    assert "marker0" in fake_llm.chat_requests[-1]["messages"][1]["content"]  # the oldest went to the summarizer
    assert Step.objects.filter(agent=agent, kind="summarizer", run=None).count() == 1


def test_summarize_with_all_mode_and_a_prompt_keeps_only_the_summary(api, account, fake_llm):
    agent = make_agent(account.org)
    _say(agent, "Only turn", fake_llm)
    fake_llm.script(FakeLLM.text("Everything, briefly."))
    body = {"compaction_settings": {"mode": "all", "prompt": "Summarize like a pirate."}}
    r = api.post(f"/v1/agents/{agent.id}/summarize", body).json()
    assert r["num_messages_after"] == 2  # the system message and the summary
    assert fake_llm.chat_requests[-1]["messages"][0]["content"] == "Summarize like a pirate."


def test_summarize_with_nothing_to_compact(api, account, other_account):
    agent = make_agent(account.org)
    empty = api.post(f"/v1/agents/{agent.id}/summarize")
    assert empty.status_code == 200
    assert empty.json() == {"summary": None, "num_messages_before": 1, "num_messages_after": 1}
    greeted = make_agent(account.org, name="greeted", initial_messages=[{"role": "user", "text": "hello"}])
    one_left = api.post(f"/v1/agents/{greeted.id}/summarize", {})  # a sliding window keeps the newest message
    assert one_left.status_code == 400 and "failed to reduce the number of messages" in one_left.json()["detail"]
    assert ApiClient(other_account.token).post(f"/v1/agents/{agent.id}/summarize").status_code == 404
    bad = {"compaction_settings": {"mode": "most"}}
    assert api.post(f"/v1/agents/{agent.id}/summarize", bad).status_code == 422


def test_summarize_waits_for_no_run_and_compacts_a_conversation_too(api, account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "slow"}, latency=1.0))
    run = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "go"}).json()
    busy = api.post(f"/v1/agents/{agent.id}/summarize", {})
    assert busy.status_code == 409 and busy.json()["errors"]["run_id"] == run["id"]
    executor.run_wait(run=Run.objects.get(pk=run["id"]))
    conv = conversation_create(agent=agent)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "in the thread"}))
    executor.run_call(
        RunRequest(
            owner=account.org,
            agent_id=agent.id,
            input_messages=[{"role": "user", "content": "hi"}],
            conversation_id=conv.id,
        )
    )
    own_before = list(Agent.objects.get(pk=agent.pk).message_ids)
    fake_llm.script(FakeLLM.text("A short thread."))
    done = agent_compact(agent=Agent.objects.get(pk=agent.pk), conversation_id=conv.id, overrides={"mode": "all"})
    conv.refresh_from_db()
    assert done.summary == "A short thread." and done.num_messages_after == len(conv.message_ids) == 2
    assert Message.objects.get(pk=conv.message_ids[1]).conversation_id == conv.id
    assert Agent.objects.get(pk=agent.pk).message_ids == own_before  # the agent's own thread is untouched


def test_recompile_answers_the_compiled_system_prompt(api, account, other_account):
    agent = make_agent(account.org)
    r = api.post(f"/v1/agents/{agent.id}/recompile?dry_run=true")
    assert r.status_code == 200
    prompt = r.json()
    assert isinstance(prompt, str) and prompt.startswith(agent.system) and "The user's name is Alice." in prompt
    assert api.post(f"/v1/agents/{agent.id}/recompile").json() == prompt
    assert ApiClient(other_account.token).post(f"/v1/agents/{agent.id}/recompile").status_code == 404


# --------------------------------------------------------------------------- models, unsupported routes


def test_models_lists_chat_models_only(api, fake_llm):
    handles = {m["handle"] for m in api.get("/v1/models/").json()}
    assert "openai/fake-model" in handles and not any("embedding" in h for h in handles)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("delete", "/v1/templates/run-x"),
        ("post", "/v1/templates"),
        ("post", "/v1/templates/run-x/save"),
        ("get", "/v1/environments"),
        ("get", "/v1/metadata/balance"),
    ],
)
def test_unsupported_letta_routes_answer_a_json_404_naming_them(api, method, path):
    r = getattr(api, method)(path) if method in ("get", "delete") else getattr(api, method)(path, {})
    shape = path.replace("agent-x", "{}").replace("run-x", "{}").replace("source-x", "{}").replace("file-x", "{}")
    assert r.status_code == 404 and r.json() == {"detail": f"{method.upper()} {shape} is not supported by this server"}


def test_unknown_routes_still_say_so(api):
    assert "no API route" in api.get("/v1/no-such-thing").json()["detail"]
    assert api.delete("/v1/models/").status_code == 405
