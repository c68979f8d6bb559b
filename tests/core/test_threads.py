"""Threads side by side (Letta locks per conversation): runs of one agent in different threads — its own and each
conversation — run at once, each thread one run at a time (a second send to a busy thread is Letta's 409); the
agent's message sequence is shared, each step taking its seqs under the agent's row lock. Run on SQLite and on
PostgreSQL (DATABASE_URL), where a seq read in the snapshot from before the lock wait gave duplicates once."""

import threading

import pytest
from django.db import connection

from core.agents.conversations import conversation_create
from core.models import Agent, Conversation, Message, Run
from core.runs import executor, runner
from core.runs.request import RunRequest
from tests.factories import make_agent

pytestmark = pytest.mark.django_db(transaction=True)

THREADS, SENDS = 8, 10
BUSY = "CONFLICT: Cannot send a new message: Another request (run_id={}) is currently being processed for this conversation."


def _send(account, agent, text: str, thread: str | None) -> Run:
    inputs = [{"role": "user", "content": text}]
    request = RunRequest(owner=account.org, agent_id=agent.id, input_messages=inputs, conversation_id=thread)
    return executor.run_call(request)


def _overlap(runs: list[Run]) -> int:
    """The most runs that were running at one moment (from their stored start and end)."""
    edges = sorted([(r.started_at, 1) for r in runs] + [(r.completed_at, -1) for r in runs], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_eight_threads_send_ten_messages_each_to_one_agent(account, fake_llm):
    agent = make_agent(account.org)
    threads = [conversation_create(agent=agent).id for _ in range(THREADS - 1)] + [None]  # and the agent's own
    fake_llm.latency = 0.05  # every model call: the threads' runs are in flight together
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def worker(i: int, thread: str | None) -> None:
        try:
            start.wait(30)
            for j in range(SENDS):
                run = _send(account, agent, f"thread {i} message {j}", thread)
                assert run.status == "completed", (run.id, run.status, run.error)
        except BaseException as exc:  # noqa: BLE001 - raised on the test's thread
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=worker, args=(i, t)) for i, t in enumerate(threads)]
    [w.start() for w in workers]
    [w.join(300) for w in workers]
    assert not errors, errors[:3]
    assert not any(w.is_alive() for w in workers)

    runs = list(Run.objects.filter(agent=agent).order_by("created_at"))
    assert len(runs) == THREADS * SENDS and {r.status for r in runs} == {"completed"}
    assert _overlap(runs) > 1  # side by side, not one at a time
    # One sequence for the agent, whichever thread wrote: no seq twice, none skipped (the agent's first system message is seq 0).
    seqs = list(Message.objects.filter(agent=agent).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for i, thread in enumerate(threads):
        mine = Message.objects.filter(agent=agent, conversation_id=thread).order_by("seq")
        said = [m.text for m in mine.filter(role="user")]
        assert said == [f"thread {i} message {j}" for j in range(SENDS)]  # none lost, none doubled, in order
        window = (
            Agent.objects.get(pk=agent.pk).message_ids
            if thread is None
            else Conversation.objects.get(pk=thread).message_ids
        )
        in_window = Message.objects.filter(pk__in=window)
        assert in_window.filter(role="user").count() == SENDS and in_window.filter(role="assistant").count() == SENDS
        assert not in_window.exclude(conversation_id=thread).exists()  # each window holds its own thread only


def test_a_busy_thread_refuses_a_second_send_while_the_agents_other_threads_go_on(api, account, fake_llm):
    agent = make_agent(account.org)
    first, second = conversation_create(agent=agent).id, conversation_create(agent=agent).id
    inputs = [{"role": "user", "content": "take your time"}]
    request = RunRequest(owner=account.org, agent_id=agent.id, input_messages=inputs, conversation_id=first)
    busy = runner.run_start(request)  # claimed and committed: the thread's run in progress until it executes below
    body = {"messages": [{"role": "user", "content": "hello again"}], "streaming": False}

    refused = api.post(f"/v1/conversations/{first}/messages", body)
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith(BUSY.format(busy.id)) and refused.json()["errors"]["run_id"] == busy.id

    other = api.post(f"/v1/conversations/{second}/messages", body)
    assert other.status_code == 200, other.content
    own = api.post(f"/v1/agents/{agent.id}/messages", {"messages": body["messages"]})
    assert own.status_code == 200, own.content
    # agent-wide operations still wait for every thread of the agent
    assert api.patch(f"/v1/agents/{agent.id}/reset-messages", {}).status_code == 409
    assert api.post(f"/v1/agents/{agent.id}/summarize", {}).status_code == 409

    assert runner.run_steps(busy, request).status == "completed"
    again = api.post(f"/v1/conversations/{first}/messages", body)
    assert again.status_code == 200, again.content
    seqs = list(Message.objects.filter(agent=agent).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def _memory_call(agent, name: str, **args):
    """A memory tool call of a step of one of the agent's threads, run (outside any transaction) but not committed."""
    from core.agents.context import agent_snapshot
    from core.engine.loop import ParsedCall
    from core.engine.types import ToolCall
    from core.runs import tool_exec

    call = ParsedCall(
        call=ToolCall(id=f"call-{name}", name=name, arguments="{}"), args=args, thinking=None, request_heartbeat=False
    )
    return tool_exec.builtin_run(call, agent_snapshot(agent=Agent.objects.get(pk=agent.pk)), "")


def _commit(agent, out):
    from django.db import transaction

    from core.runs import persistence, tool_exec

    outcomes = {0: out}
    with transaction.atomic():
        persistence.agent_lock(agent.id)
        tool_exec.effects_apply(outcomes)
    return outcomes[0]


def test_a_block_edit_is_made_again_on_what_another_thread_wrote_meanwhile(account):
    from memory.models import Block

    agent = make_agent(account.org)
    human = lambda: Block.objects.get(agentblock__agent=agent, label="human").value  # noqa: E731
    # two threads' steps read the block before either commits; the second to commit keeps the first's edit
    tea = _memory_call(agent, "core_memory_append", label="human", content="Likes tea.")
    chess = _memory_call(agent, "core_memory_append", label="human", content="Likes chess.")
    assert _commit(agent, chess).ok and _commit(agent, tea).ok
    assert human() == "The user's name is Alice.\nLikes chess.\nLikes tea."
    # an edit whose text another thread removed meanwhile fails for its model instead of undoing that change
    rename = _memory_call(agent, "memory_replace", label="human", old_string="Alice", new_string="Ada")
    drop = _memory_call(agent, "memory_replace", label="human", old_string="The user's name is Alice.\n", new_string="")
    assert _commit(agent, drop).ok
    refused = _commit(agent, rename)
    assert not refused.ok and "Alice" in refused.value
    assert human() == "Likes chess.\nLikes tea."
