"""Archival and recall REST endpoints, through the test client and through Letta's official 1.x SDK."""

import pytest

from memory import services
from tests.memory.conftest import add_message

pytestmark = pytest.mark.django_db


def test_archival_crud_and_search(api, agent):
    base = f"/v1/agents/{agent.id}/archival-memory"
    created = api.post(base, {"text": "Alice's birthday is 3 March", "tags": ["birthday", "alice"]})
    assert created.status_code == 200, created.content
    [passage] = created.json()
    assert passage["text"] == "Alice's birthday is 3 March" and passage["source"] == "user"
    assert passage["tags"] == ["birthday", "alice"] and passage["embedding"] is None
    services.passage_insert(agent=agent, text="Bob's birthday is in June", tags=["birthday"])

    listed = api.get(base, data={"limit": 10}).json()
    assert [p["text"] for p in listed] == ["Alice's birthday is 3 March", "Bob's birthday is in June"]
    assert [p["source"] for p in listed] == ["user", "agent"]

    found = api.get(f"{base}/search", data={"query": "when is Alice's birthday?", "tags": ["alice"]}).json()
    assert found["count"] == 1
    assert found["results"][0]["content"] == "Alice's birthday is 3 March"
    assert set(found["results"][0]) == {"id", "timestamp", "content", "tags"}
    both = api.get(
        f"{base}/search", data={"query": "birthday", "tags": ["alice", "birthday"], "tag_match_mode": "all"}
    ).json()
    assert [r["id"] for r in both["results"]] == [passage["id"]]

    status = api.get(f"{base}/status").json()
    assert status["search_mode"] == "full_text" and status["num_archival_memory"] == 2

    assert api.delete(f"{base}/{passage['id']}").status_code == 200
    assert api.delete(f"{base}/{passage['id']}").status_code == 404
    assert len(api.get(base).json()) == 1


def test_archival_is_private_to_the_owner(api, other_account, agent):
    from tests.factories import ApiClient

    services.passage_insert(agent=agent, text="private")
    intruder = ApiClient(other_account.token)
    assert intruder.get(f"/v1/agents/{agent.id}/archival-memory").status_code == 404
    assert intruder.get(f"/v1/agents/{agent.id}/archival-memory/search", data={"query": "private"}).status_code == 404


def test_bad_dates_are_422(api, agent):
    r = api.get(f"/v1/agents/{agent.id}/archival-memory/search", data={"query": "x", "start_datetime": "yesterday-ish"})
    assert r.status_code == 422


def test_recall_search_endpoint(api, agent):
    add_message(agent, "user", "remember the pineapple", in_context=False)
    add_message(agent, "user", "unrelated")
    rows = api.get(f"/v1/agents/{agent.id}/recall-memory/search", data={"query": "pineapple", "roles": ["user"]}).json()
    assert [(m["message_type"], m["content"]) for m in rows] == [("user_message", "remember the pineapple")]


def test_block_history_endpoint_has_diffs(api, agent):
    block = api.get(f"/v1/agents/{agent.id}/core-memory/blocks/human").json()
    api.patch(f"/v1/blocks/{block['id']}", {"value": "The user's name is Alice.\nShe likes tea."})
    history = api.get(f"/v1/blocks/{block['id']}/history").json()
    assert history[0]["diff"][-1] == "+She likes tea."


@pytest.fixture
def wsgi_app():
    """Django's WSGI app for httpx; like the test client, requests must not close the test's DB connection."""
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_letta_sdk_passages(account, agent, wsgi_app):
    """client.agents.passages.create/list/search/delete as the official SDK sends them."""
    import httpx
    import letta_client

    http = httpx.Client(transport=httpx.WSGITransport(app=wsgi_app), base_url="http://testserver")
    client = letta_client.Letta(api_key=account.token, base_url="http://testserver", http_client=http)
    created = client.agents.passages.create(agent.id, text="The wifi password is hunter2", tags=["wifi"])
    assert created[0].text == "The wifi password is hunter2" and created[0].tags == ["wifi"]
    client.agents.passages.create(agent.id, text="The door code is 1234")
    assert [p.text for p in client.agents.passages.list(agent.id, limit=1)] == ["The wifi password is hunter2"]
    result = client.agents.passages.search(
        agent.id, query="wifi password", tags=["wifi"], tag_match_mode="all", top_k=3
    )
    assert result.count == 1 and result.results[0].content == "The wifi password is hunter2"
    client.agents.passages.delete(created[0].id, agent_id=agent.id)
    assert [p.text for p in client.agents.passages.list(agent.id)] == ["The door code is 1234"]
