"""Query counts on the hot paths, pinned: a change that adds a query per step, per send or per listed agent
fails here and must say why (update the number with the reason in the commit). Counts are after a warm-up
call, as in a running server (the model list and the message cache are filled)."""

import pytest
from django.db import connection

from core.models import Message
from core.runs.runner import run_agent
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM

# On SQLite the claim's locking read also brings the agent's memory counts and current version, and the step's lock
# its highest message seq; PostgreSQL reads them after the lock, in statements of their own (a locking read that
# waited sees its subqueries as before the wait: core.runs.runner._claim_read, core.runs.persistence.agent_lock).
SQLITE = connection.vendor == "sqlite"
STEP_QUERIES = 18 if SQLITE else 20  # one model call and its reply: the claim (which stores the input, so a crash
# keeps it), load (the agent with its memory counts), compile, the step's transaction (which links the input to the
# step, as Letta's step_id, and stores the run's end)
CONTEXT_QUERIES = 4  # GET /v1/agents/{id}/context: the agent with its memory counts, blocks, tools, and whether a
# breakpoint holds a run of the thread (the simulator then compiles that run's next call); the token's principal is
# remembered from the warm-up (core.accounts.PRINCIPAL_TTL_S)
AGENTS_LIST_QUERIES = 4  # GET /v1/agents/, whatever the number of agents (no query per agent)


def _reply(fake_llm, text="hello"):
    fake_llm.script(FakeLLM.tool("send_message", {"message": text}))


@pytest.fixture
def agent(account, fake_llm):
    agent = make_agent(account.org)
    _reply(fake_llm)
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "warm up"}])
    return agent


def test_one_step(agent, fake_llm, django_assert_num_queries):
    _reply(fake_llm)
    with django_assert_num_queries(STEP_QUERIES):
        result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    assert result.status == "completed" and result.usage["step_count"] == 1


def test_context_read(agent, account, django_assert_num_queries):
    api = ApiClient(account.token)
    assert api.get(f"/v1/agents/{agent.id}/context").status_code == 200
    with django_assert_num_queries(CONTEXT_QUERIES):
        response = api.get(f"/v1/agents/{agent.id}/context")
    assert response.status_code == 200 and response.json()["context_window_size_current"] > 0


@pytest.mark.parametrize("agents", [2, 6])
def test_agents_list_does_not_grow_with_the_agents(account, fake_llm, agents, django_assert_num_queries):
    for i in range(agents):
        make_agent(account.org, name=f"a{i}", tags=["t"])
    api = ApiClient(account.token)
    assert api.get("/v1/agents/").status_code == 200
    with django_assert_num_queries(AGENTS_LIST_QUERIES):
        response = api.get("/v1/agents/")
    assert response.status_code == 200 and len(response.json()) == agents


def _send_twice(fake_llm, django_assert_max_num_queries, queries, send, check):
    """Send "warm up" (first-use costs not counted), then "hi" in at most `queries` statements; `check(text,
    response)` after each, outside the count."""
    for text, limit in (("warm up", 1000), ("hi", queries)):
        _reply(fake_llm, text)
        with django_assert_max_num_queries(limit):
            response = send(text)
        check(text, response)


# POST …/messages, which executes its run on the request's own thread: the claim (lock with the agent's memory counts
# and version, busy check, the agent's model, the run and its input), one step (blocks and tools beside the claim's
# agent row, lock, step, messages, the input linked to the step, agent and the run's end); the token's principal is
# remembered from the warm-up, and the reply is made from the rows the run stored, not read back
SEND_REQUEST_QUERIES = 18 if SQLITE else 20


@pytest.mark.django_db(transaction=True)  # a queued run would execute on a pool thread, which sees committed rows
def test_message_send_on_the_request_thread(account, fake_llm, django_assert_max_num_queries):
    agent = make_agent(account.org)
    api = ApiClient(account.token)

    def send(text):
        return api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": text}]})

    def check(text, response):
        said = [m["content"] for m in response.json()["messages"] if m["message_type"] == "assistant_message"]
        assert response.status_code == 200 and said == [text]

    _send_twice(fake_llm, django_assert_max_num_queries, SEND_REQUEST_QUERIES, send, check)


# POST …/messages/async: one transaction: the claim (lock with the agent's memory counts and version, busy check, the
# run and its input), the task row, the agent's model (its provider rows); the token's principal is remembered
SEND_ASYNC_QUERIES = 8 if SQLITE else 9


@pytest.mark.django_db(transaction=True)  # the queued run executes on a pool thread, which sees committed rows
def test_async_send_request(account, fake_llm, django_assert_max_num_queries):
    from core.models import RUN_TERMINAL, Run
    from tests.helpers import until

    agent = make_agent(account.org)
    api = ApiClient(account.token)

    def send(text):
        return api.post(f"/v1/agents/{agent.id}/messages/async", {"input": text})

    def check(text, response):
        assert response.status_code == 200, response.content
        run_id = response.json()["id"]
        until(lambda: Run.objects.filter(pk=run_id, status__in=RUN_TERMINAL).exists(), what="the run's end")

    _send_twice(fake_llm, django_assert_max_num_queries, SEND_ASYNC_QUERIES, send, check)
    said = Message.objects.filter(agent=agent, role="tool").count()
    assert said == 2
