"""A run whose process is known dead is failed at once, lease or not (core.runs.liveness): a process of this machine
and pid namespace that no longer exists, or whose pid now names a later process. Processes elsewhere are never judged:
only their lease says they died."""

import subprocess
import sys

import pytest

from core.models import Message, Run
from core.runs import liveness, queue
from core.runs.request import RunRequest
from core.runs.runner import run_start
from tests.factories import make_agent

pytestmark = pytest.mark.skipif(not liveness.local_marker(), reason="needs /proc (Linux)")


def _identity_of_a_finished_process() -> str:
    code = "from core.runs import liveness; print(liveness.identity())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_a_finished_process_is_gone_a_running_one_is_not():
    dead = _identity_of_a_finished_process()
    assert dead.startswith(liveness.local_marker()) and liveness.process_gone(dead)
    assert not liveness.process_gone(liveness.IDENTITY)


def test_a_reused_pid_is_another_process():
    where, start, host_pid = liveness.IDENTITY.split("|")
    assert liveness.process_gone(f"{where}|{int(start) + 1}|{host_pid}")


def test_processes_elsewhere_are_not_judged():
    _, start, host_pid = liveness.IDENTITY.split("|")
    assert not liveness.process_gone(f"another-boot/pid:[1]|{start}|{host_pid}")  # another machine or container
    assert not liveness.process_gone("somehost:1")  # no namespace recorded (not Linux, or an older server)
    assert not liveness.process_gone("")


def test_the_sweep_fails_the_runs_of_a_dead_process_of_this_machine_before_their_lease_lapses(account, monkeypatch):
    events = []
    monkeypatch.setattr("core.events.send_event", lambda group, event: events.append(event))
    agent, other, mine = (make_agent(account.org, name=n) for n in ("a", "b", "c"))
    dead = Run.objects.create(
        owner=account.org, agent=agent, status="running", worker=_identity_of_a_finished_process(), background=True
    )
    elsewhere = Run.objects.create(
        owner=account.org, agent=other, status="running", worker="x/pid:[1]|5|otherhost:1", background=True
    )
    alive = Run.objects.create(owner=account.org, agent=mine, status="running", worker=queue.WORKER_ID, background=True)
    for run in (dead, elsewhere, alive):  # fresh leases
        Run.objects.filter(pk=run.pk).update(heartbeat_at=run.created_at)
    assert queue.runs_reap(lease_s=3600) == [dead.id]
    dead.refresh_from_db()
    assert (dead.status, dead.stop_reason, dead.error) == ("failed", "error", queue.GONE) and dead.completed_at
    assert Run.objects.get(pk=elsewhere.pk).status == Run.objects.get(pk=alive.pk).status == "running"
    assert events == [
        {
            "message_type": "run_status",
            "run_id": dead.id,
            "status": "failed",
            "stop_reason": "error",
            "error": queue.GONE,
        }
    ]


def test_a_send_to_an_agent_held_by_a_dead_process_is_taken_and_its_message_kept(account):
    agent = make_agent(account.org)

    def send(text: str) -> Run:  # the claim alone is under test: no provider needed
        inputs = [{"role": "user", "content": text}]
        return run_start(
            RunRequest(owner=account.org, agent_id=agent.id, input_messages=inputs, refuse_unconfigured=False)
        )

    held = send("lost?")
    Run.objects.filter(pk=held.pk).update(status="running", worker=_identity_of_a_finished_process())
    again = send("back")
    held.refresh_from_db()
    assert (held.status, held.error) == ("failed", queue.GONE) and again.status == "created"
    kept = Message.objects.filter(agent=agent, role="user").order_by("seq")
    assert [(m.text, m.run_id, m.step_id) for m in kept] == [("lost?", held.id, None), ("back", again.id, None)]
