"""Scheduled messages' dispatcher (core.runs.schedules): a due one-time message is sent once through the run queue
and removed; a recurring one moves to its next time; a busy agent's message waits and goes after; two dispatchers
racing send once; a row another process holds is passed by (PostgreSQL); a message that came due while the server
was down is sent when a server process starts."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from core.errors import DomainError, Invalid
from core.models import Message, Run, ScheduledMessage
from core.runs import executor, queue, schedules
from core.runs.request import RunRequest
from core.runs.schedules import scheduled_message_create, scheduled_messages_dispatch
from tests.conftest import postgres_required
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import daphne_start, until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _queue_stopped_after(transactional_db):
    yield
    queue.shutdown()


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _one_time(agent, text: str, *, at: datetime, now: datetime | None = None) -> ScheduledMessage:
    return scheduled_message_create(
        agent=agent, messages=[{"role": "user", "content": text}], schedule={"scheduled_at": _ms(at)}, now=now
    )


def _sent(agent, text: str) -> int:
    return Message.objects.filter(agent=agent, role="user", text=text).count()


def test_a_due_one_time_message_is_sent_once_and_removed(agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Here is your summary."}))
    row = _one_time(agent, "Daily summary please", at=timezone.now() + timedelta(hours=1))
    assert scheduled_messages_dispatch() == []  # not due yet
    later = timezone.now() + timedelta(hours=2)
    [run_id] = scheduled_messages_dispatch(now=later)
    run = executor.run_wait(run=Run.objects.get(pk=run_id))
    assert run.status == "completed" and run.background and run.agent_id == agent.id
    assert _sent(agent, "Daily summary please") == 1
    assert Message.objects.filter(agent=agent, role="assistant").exists()
    assert not ScheduledMessage.objects.filter(pk=row.pk).exists()  # Letta: executed once, then removed
    assert scheduled_messages_dispatch(now=later + timedelta(days=1)) == []
    assert Run.objects.filter(agent=agent).count() == 1


def test_a_recurring_message_moves_to_its_next_time(agent, fake_llm):
    fake_llm.script(FakeLLM.text("ok"), FakeLLM.text("ok"))
    row = scheduled_message_create(
        agent=agent,
        messages=[{"role": "user", "content": [{"type": "text", "text": "Check the alerts"}]}],
        schedule={"type": "recurring", "cron_expression": "0 9 * * *"},
        now=datetime(2026, 12, 7, 6, 35, tzinfo=UTC),
    )
    assert row.next_run_at == datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    # The server was down over two 09:00s: it sends once, then the next time is the first after now.
    now = datetime(2026, 12, 9, 10, 0, tzinfo=UTC)
    [run_id] = scheduled_messages_dispatch(now=now)
    row.refresh_from_db()
    assert row.next_run_at == datetime(2026, 12, 10, 9, 0, tzinfo=UTC) and row.last_run_id == run_id
    executor.run_wait(run=Run.objects.get(pk=run_id))
    assert scheduled_messages_dispatch(now=now) == []
    [again] = scheduled_messages_dispatch(now=datetime(2026, 12, 10, 9, 0, tzinfo=UTC))
    assert again != run_id and _sent(agent, "Check the alerts") == 2


def test_a_busy_agents_message_waits_and_is_sent_after(agent, fake_llm):
    gate = threading.Event()
    original = fake_llm._next_reply

    def held(req):
        gate.wait(60)
        return original(req)

    fake_llm._next_reply = held
    fake_llm.script(FakeLLM.text("first"), FakeLLM.text("second"))
    busy = executor.run_submit(
        RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "working"}])
    )
    until(lambda: Run.objects.get(pk=busy.pk).status == "running", what="the busy run")
    row = _one_time(agent, "When you are free", at=timezone.now() + timedelta(hours=1))
    later = timezone.now() + timedelta(hours=2)
    assert scheduled_messages_dispatch(now=later) == []
    assert ScheduledMessage.objects.filter(pk=row.pk, next_run_at__isnull=False).exists()  # still due, not lost
    gate.set()
    executor.run_wait(run=busy)
    [run_id] = scheduled_messages_dispatch(now=later)
    assert executor.run_wait(run=Run.objects.get(pk=run_id)).status == "completed"
    assert _sent(agent, "When you are free") == 1


def test_two_dispatchers_racing_send_once(agent, fake_llm):
    fake_llm.script(*[FakeLLM.text("ok")] * 3)
    rows = [_one_time(agent, f"race {i}", at=timezone.now() + timedelta(hours=1)) for i in range(3)]
    later, start, results = timezone.now() + timedelta(hours=2), threading.Barrier(2), []

    def dispatch():
        start.wait(10)
        try:
            while True:  # until nothing is due: a message of a busy agent waits for the next sweep
                sent = scheduled_messages_dispatch(now=later)
                results.extend(sent)
                if not ScheduledMessage.objects.filter(next_run_at__lte=later).exists():
                    return
                for run in Run.objects.filter(agent=agent, status__in=["created", "running"]):
                    executor.run_wait(run=run)
        finally:
            connection.close()

    threads = [threading.Thread(target=dispatch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == len(set(results)) == 3
    for run in Run.objects.filter(agent=agent):
        executor.run_wait(run=run)
    assert [_sent(agent, f"race {i}") for i in range(3)] == [1, 1, 1]
    assert Run.objects.filter(agent=agent).count() == 3 and not ScheduledMessage.objects.filter(pk__in=rows).exists()


def test_a_dispatcher_that_listed_a_row_before_another_sent_it_does_not_send_it_again(agent, fake_llm, monkeypatch):
    fake_llm.script(FakeLLM.text("ok"), FakeLLM.text("ok"))
    scheduled_message_create(
        agent=agent,
        messages=[{"role": "user", "content": "Hourly check"}],
        schedule={"type": "recurring", "cron_expression": "0 * * * *"},
    )
    real, mine = schedules._dispatch_one, []

    def overtaken(pk, now):
        other = real(pk, now)  # another process sends it between our listing and our claim, and its run ends
        executor.run_wait(run=Run.objects.get(pk=other))
        mine.append(real(pk, now))
        return mine[-1]

    monkeypatch.setattr(schedules, "_dispatch_one", overtaken)
    assert scheduled_messages_dispatch(now=timezone.now() + timedelta(hours=1)) == [] and mine == [None]
    assert _sent(agent, "Hourly check") == 1 and Run.objects.filter(agent=agent).count() == 1


def test_a_row_another_process_holds_is_passed_by(agent):
    postgres_required()
    row = _one_time(agent, "held elsewhere", at=timezone.now() + timedelta(hours=1))
    locked, release = threading.Event(), threading.Event()

    def hold():
        try:
            with transaction.atomic():
                list(ScheduledMessage.objects.select_for_update().filter(pk=row.pk))
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(30)
    try:
        assert scheduled_messages_dispatch(now=timezone.now() + timedelta(hours=2)) == []  # no wait, no send
    finally:
        release.set()
        holder.join(30)
    assert Run.objects.filter(agent=agent).count() == 0 and ScheduledMessage.objects.filter(pk=row.pk).exists()


def test_bad_schedules_are_refused_and_nothing_is_stored(agent):
    now = timezone.now()
    with pytest.raises(DomainError, match="must be in the future"):
        _one_time(agent, "too late", at=now - timedelta(minutes=1))
    with pytest.raises(DomainError, match="milliseconds"):
        scheduled_message_create(
            agent=agent, messages=[{"role": "user", "content": "x"}], schedule={"scheduled_at": -5}
        )
    with pytest.raises(DomainError, match="cron_expression: .*5 fields"):
        scheduled_message_create(
            agent=agent,
            messages=[{"role": "user", "content": "x"}],
            schedule={"type": "recurring", "cron_expression": "every day"},
        )
    with pytest.raises(Invalid, match="has no text"):
        _one_time(agent, "  ", at=now + timedelta(hours=1))
    assert not ScheduledMessage.objects.exists()


def test_a_message_that_came_due_while_the_server_was_down_is_sent_at_start(agent, fake_llm, tmp_path):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Sorry I'm late"}))
    now = timezone.now()
    # Created an hour before it came due, which was a minute ago, while no server ran.
    _one_time(agent, "Wake up", at=now - timedelta(minutes=1), now=now - timedelta(hours=1))
    server = daphne_start(
        env={"OPENAI_API_KEY": "fake-key", "OPENAI_BASE_URL": fake_llm.base_url}, log=tmp_path / "daphne.log"
    )
    try:
        run = until(lambda: Run.objects.filter(agent=agent, status="completed").first(), what="the run sent at start")
    finally:
        server.stop()
    assert _sent(agent, "Wake up") == 1 and Run.objects.filter(agent=agent).count() == 1, server.log_tail()
    assert not ScheduledMessage.objects.exists() and run.background


def test_an_agent_holds_a_bounded_number_of_schedules(agent, monkeypatch):
    monkeypatch.setattr(schedules, "MAX_PER_AGENT", 2)
    at = timezone.now() + timedelta(hours=1)
    _one_time(agent, "one", at=at)
    _one_time(agent, "two", at=at)
    with pytest.raises(DomainError, match="at most 2 scheduled messages"):
        _one_time(agent, "three", at=at)
    assert ScheduledMessage.objects.filter(agent=agent).count() == 2
