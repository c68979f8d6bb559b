"""Background runs through the REST API: /messages/async on the queue, run status and messages, cancel,
busy agents, and the lease reaper for runs whose worker died."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import Message, Run, Step
from core.runs import queue
from core.runs.request import RunRequest
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until


@pytest.fixture(autouse=True)
def _queue_stopped_after(transactional_db):
    yield
    queue.shutdown()


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def _run(api, run_id) -> dict:
    return api.get(f"/v1/runs/{run_id}").json()


def test_async_send_returns_a_run_that_completes_on_the_queue(api, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "done in background"}))
    r = api.post(f"/v1/agents/{agent.id}/messages/async", {"messages": [{"role": "user", "content": "go"}]})
    assert r.status_code == 200, r.content
    run = r.json()
    assert run["status"] == "created" and run["agent_id"] == agent.id and run["background"] is True
    assert run["id"].startswith("run-") and run["created_at"]
    final = until(lambda: (x := _run(api, run["id"]))["status"] == "completed" and x)
    assert final["stop_reason"] == "end_turn" and final["usage"]["step_count"] == 1
    messages = api.get(f"/v1/runs/{run['id']}/messages").json()
    assert [m["content"] for m in messages if m["message_type"] == "assistant_message"] == ["done in background"]
    assert api.get(f"/v1/runs/{run['id']}/usage").json()["step_count"] == 1
    assert Run.objects.get(pk=run["id"]).worker == queue.WORKER_ID


def test_second_send_while_a_background_run_is_active_gets_409(api, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "slow"}, latency=1.0))
    first = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "one"}).json()
    second = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "two"})
    assert second.status_code == 409 and second.json()["errors"]["run_id"] == first["id"]
    assert second.json()["run_id"] == first["id"]  # Letta's ConversationBusyError body names it at the top level
    until(lambda: _run(api, first["id"])["status"] == "completed")
    assert api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "three"}).status_code == 200


def test_cancel_stops_a_background_run_at_a_step_boundary(api, agent, fake_llm):
    fake_llm.script(
        *[FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True, latency=0.4) for _ in range(10)]
    )
    run = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "search forever"}).json()
    until(lambda: Step.objects.filter(run_id=run["id"]).exists())
    r = api.post(f"/v1/agents/{agent.id}/messages/cancel", {})
    assert r.json() == {run["id"]: "cancellation requested"}
    final = until(lambda: (x := _run(api, run["id"]))["status"] == "cancelled" and x)
    assert final["stop_reason"] == "cancelled"
    steps = Step.objects.filter(run_id=run["id"]).count()
    assert 1 <= steps < 10
    # Every committed step holds its whole exchange (assistant + tool return); nothing half-written.
    assert Message.objects.filter(run_id=run["id"], role="assistant").count() == steps
    assert Message.objects.filter(run_id=run["id"], role="tool").count() == steps
    agent.refresh_from_db()
    assert set(agent.message_ids) <= set(Message.objects.filter(agent=agent).values_list("id", flat=True))


def test_reaper_fails_runs_whose_lease_lapsed(agent, monkeypatch):
    events = []
    monkeypatch.setattr("core.events.send_event", lambda group, event: events.append(event))
    old = timezone.now() - timedelta(seconds=120)
    dead = Run.objects.create(
        owner=agent.owner, agent=agent, status="running", worker="gone:1", heartbeat_at=old, background=True
    )
    alive = Run.objects.create(
        owner=agent.owner, agent=agent, status="running", worker="here:2", heartbeat_at=timezone.now(), background=True
    )
    assert queue.runs_reap(lease_s=30) == [dead.id]
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert dead.status == "failed" and "worker lost" in dead.error and dead.completed_at
    assert alive.status == "running"
    assert events[0]["message_type"] == "run_status" and events[0]["status"] == "failed"


def test_async_with_unknown_agent_or_model_fails_fast(api, account):
    assert api.post("/v1/agents/agent-nope/messages/async", {"input": "x"}).status_code == 404
    agent = make_agent(account.org, model="openai/fake-model")
    r = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "x"})
    assert r.status_code == 400 and not Run.objects.filter(agent=agent).exists()


def test_a_task_handed_to_the_pool_is_claimed_once(agent):
    from core.models import QueuedTask
    from core.runs.executor import run_execute_task

    enqueued = run_execute_task.enqueue(run_id="run-none")  # enqueued only: no pool was told
    first = queue._claim_enqueued(enqueued)
    assert first is not None and first.id == enqueued.id and first.kwargs == {"run_id": "run-none"}
    stored = QueuedTask.objects.get(pk=enqueued.id)
    assert stored.status == QueuedTask.RUNNING and stored.worker_ids == [queue.WORKER_ID]
    assert queue._claim_enqueued(enqueued) is None  # a second claimant (another thread, the dispatcher) gets nothing
    assert queue._claim() is None


def test_the_dispatcher_claims_ready_tasks_by_priority_then_age_and_leaves_those_not_due(agent):
    from core.models import QueuedTask
    from core.runs.executor import run_execute_task

    now = timezone.now()
    later = run_execute_task.using(run_after=now + timedelta(hours=1)).enqueue(run_id="run-later")
    low = run_execute_task.using(priority=-5).enqueue(run_id="run-low")
    first = run_execute_task.enqueue(run_id="run-first")
    second = run_execute_task.enqueue(run_id="run-second")
    due = run_execute_task.using(run_after=now - timedelta(minutes=1)).enqueue(run_id="run-due")
    high = run_execute_task.using(priority=10).enqueue(run_id="run-high")
    assert queue._claim_enqueued(later) is None  # handed to a pool before it is due: left to the dispatcher
    claimed = []
    while (task := queue._claim()) is not None:
        claimed.append(task)
    assert [t.id for t in claimed] == [t.id for t in (high, first, second, due, low)]
    for task in claimed:
        stored = QueuedTask.objects.get(pk=task.id)
        assert stored.status == QueuedTask.RUNNING and stored.worker_ids == [queue.WORKER_ID] and stored.started_at
        assert task.kwargs == stored.kwargs and task.task.module_path == run_execute_task.module_path
    assert QueuedTask.objects.get(pk=later.id).status == QueuedTask.READY


def test_reaper_fails_a_queued_run_whose_task_was_lost(agent):
    from core.runs.executor import run_execute_task

    old = timezone.now() - timedelta(seconds=120)
    lost = Run.objects.create(owner=agent.owner, agent=agent, status="created")  # its task never existed
    waiting = Run.objects.create(owner=agent.owner, agent=agent, status="created")
    run_execute_task.enqueue(run_id=waiting.id)  # still queued: a busy pool takes it later
    Run.objects.filter(pk__in=[lost.pk, waiting.pk]).update(created_at=old)
    assert queue.runs_reap(lease_s=30) == [lost.id]
    assert Run.objects.get(pk=waiting.pk).status == "created"


def test_a_claim_frees_an_agent_whose_run_lost_its_lease_without_the_reaper(agent):
    from core.runs import runner

    dead = Run.objects.create(
        owner=agent.owner,
        agent=agent,
        status="running",
        worker="gone:1",
        heartbeat_at=timezone.now() - timedelta(seconds=120),
    )
    run = runner.run_start(
        RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "hi"}])
    )
    dead.refresh_from_db()
    assert run.status == "created" and dead.status == "failed" and "worker lost" in dead.error


def test_a_run_no_longer_queued_is_not_executed(agent, fake_llm):
    from core.runs import executor, runner

    run = runner.run_start(
        RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "hi"}])
    )
    Run.objects.filter(pk=run.pk).update(status="cancelled")
    assert executor.run_execute(run_id=run.id) == "cancelled"
    assert fake_llm.chat_requests == [] and not Step.objects.filter(run=run).exists()


def test_waiting_for_a_run_returns_when_it_ends_or_at_the_timeout(agent, fake_llm):
    from core.runs import executor

    fake_llm.script(FakeLLM.tool("send_message", {"message": "slow"}, latency=0.5))
    run = executor.run_submit(
        RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "hi"}])
    )
    assert executor.run_wait(run=run, timeout=0.05).status in ("created", "running")
    assert executor.run_wait(run=run).status == "completed"


def test_tasks_enqueued_while_every_slot_is_taken_start_as_slots_free_without_the_dispatcher(account, fake_llm):
    from core.models import QueuedTask
    from core.runs import runner
    from core.runs.executor import run_execute_task

    fake_llm.script(*[FakeLLM.tool("send_message", {"message": f"reply {i}"}, latency=0.3) for i in range(3)])
    pool = queue.Pool(threads=1, poll_s=60)  # one slot, and no dispatcher: only the backlog can start the others
    runs = []
    for i in range(3):
        agent = make_agent(account.org, name=f"a{i}")
        run = runner.run_start(
            RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "hi"}])
        )
        runs.append(run.id)
        pool.submit(run_execute_task.enqueue(run_id=run.id))
    assert len(pool.backlog) == 2  # the first took the only slot
    try:
        until(lambda: Run.objects.filter(pk__in=runs, status="completed").count() == 3, what="all three runs")
    finally:
        pool.stop()
        pool.executor.shutdown(wait=True)
        queue._pool_connections_close()
    ended = QueuedTask.objects.filter(status=QueuedTask.SUCCESSFUL)
    assert not pool.backlog and sorted(t.return_value for t in ended) == sorted(
        Run.objects.get(pk=r).status for r in runs
    )
    assert all(t.finished_at >= t.started_at and t.error == "" for t in ended)
    assert pool.free.acquire(blocking=False)  # the slot was given back


def test_a_queued_run_executes_with_the_model_its_claim_resolved(agent, fake_llm, monkeypatch):
    """The model is resolved once, by the claim: the pool thread that executes the queued run takes it with the
    request, so a provider change after the claim does not reach that run (the next claim sees it)."""
    from django.db import transaction

    from core.runs import executor

    fake_llm.script(FakeLLM.tool("send_message", {"message": "resolved once"}))
    request = RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "go"}])
    with transaction.atomic():  # the task reaches the pool when this commits, after the provider moved
        run = executor.run_submit(request)
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    assert request.resolved is not None and request.resolved.api_base == fake_llm.base_url
    run = executor.run_wait(run=run, timeout=60)
    assert run.status == "completed", run.error
    assert Message.objects.filter(run=run, role="assistant").exists()
