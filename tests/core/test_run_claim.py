"""Claiming an agent for a run is serialized across connections: a claim that waited for another one's lock
must see the run that was committed meanwhile (PostgreSQL READ COMMITTED re-snapshots per statement)."""

import threading
import time

import pytest
from django.db import connection, transaction

from core.errors import Conflict
from core.runs.request import RunRequest
from core.runs.runner import run_start
from tests.factories import make_agent


def _request(account, agent, text: str) -> RunRequest:
    # no provider is configured here: the claim leaves the model to the run, as for an agent's own message
    inputs = [{"role": "user", "content": text}]
    return RunRequest(owner=account.org, agent_id=agent.id, input_messages=inputs, refuse_unconfigured=False)


@pytest.mark.django_db(transaction=True)
def test_a_claim_waiting_on_the_lock_sees_the_committed_run(account):
    agent = make_agent(account.org)
    first_locked, outcome = threading.Event(), {}

    def first():
        try:
            with transaction.atomic():
                outcome["first"] = run_start(_request(account, agent, "a"))
                first_locked.set()
                time.sleep(1.0)  # hold the agent's lock while the second claim queues behind it
        finally:
            connection.close()

    def second():
        first_locked.wait(10)
        try:
            outcome["second"] = run_start(_request(account, agent, "b"))
        except Conflict as exc:
            outcome["second"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    [t.start() for t in threads]
    [t.join(30) for t in threads]
    assert isinstance(outcome["second"], Conflict), outcome
    assert outcome["first"].id in outcome["second"].message
