"""Client-side access tokens (Letta Cloud's `/v1/client-side-access-tokens`, the SDK's `access_tokens`) through the
official letta-client SDK: a token for one agent may send it messages and read it, nothing else; from another origin,
expired or revoked it is refused; another account cannot see or revoke it."""

from datetime import UTC, datetime, timedelta

import letta_client
import pytest
from letta_client import Letta

from core.models import ClientSideToken
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)

APP = "https://chat.example.com"


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


@pytest.fixture
def agents(client):
    return [client.agents.create(name=n, model="openai/fake-model", agent_type="memgpt_v2_agent") for n in "ab"]


def _browser(live_server, token: str, origin: str = APP) -> Letta:
    return Letta(base_url=live_server.url, api_key=token, max_retries=0, timeout=60, default_headers={"Origin": origin})


def test_a_token_sends_to_and_reads_its_agent_only(client, live_server, agents, fake_llm):
    mine, other = agents
    made = client.access_tokens.create(
        hostname=APP,
        policy=[{"id": mine.id, "type": "agent", "access": ["read_messages", "write_messages", "read_agent"]}],
    )
    assert made.token.startswith("aide_ck_") and made.hostname == APP and made.policy.version == "1"
    expires = datetime.fromisoformat(made.expires_at.replace("Z", "+00:00"))
    assert timedelta(minutes=4) < expires - datetime.now(UTC) <= timedelta(minutes=5)  # Letta's default: 5 minutes
    browser = _browser(live_server, made.token)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello, browser"}))
    reply = browser.agents.messages.create(mine.id, messages=[{"role": "user", "content": "hi"}])
    assert any(getattr(m, "content", None) == "Hello, browser" for m in reply.messages)
    assert any(getattr(m, "content", None) == "hi" for m in browser.agents.messages.list(mine.id))
    assert browser.agents.retrieve(mine.id).id == mine.id
    for call in (
        lambda: browser.agents.retrieve(other.id),  # another agent
        lambda: browser.agents.messages.create(other.id, messages=[{"role": "user", "content": "hi"}]),
        lambda: browser.agents.update(mine.id, name="renamed"),  # write_agent not granted
        lambda: browser.agents.delete(mine.id),
        lambda: list(browser.agents.list()),
        lambda: browser.access_tokens.create(
            hostname=APP, policy=[{"id": mine.id, "type": "agent", "access": ["read_agent"]}]
        ),
        lambda: browser.tools.list(),
    ):
        with pytest.raises(letta_client.PermissionDeniedError):
            call()
    with pytest.raises(letta_client.PermissionDeniedError, match="not https://evil.example"):
        _browser(live_server, made.token, origin="https://evil.example").agents.retrieve(mine.id)
    assert client.agents.retrieve(mine.id).name == "a"


def test_expired_and_revoked_tokens_are_refused(client, live_server, agents):
    agent = agents[0]
    policy = [{"id": agent.id, "type": "agent", "access": ["read_agent"]}]
    soon = datetime.now(UTC) + timedelta(hours=1)
    made = client.access_tokens.create(hostname=APP, policy=policy, expires_at=soon.isoformat())
    assert abs(datetime.fromisoformat(made.expires_at.replace("Z", "+00:00")) - soon) < timedelta(milliseconds=1)
    browser = _browser(live_server, made.token)
    assert browser.agents.retrieve(agent.id).id == agent.id
    ClientSideToken.objects.filter(hashed__isnull=False).update(expires_at=datetime.now(UTC) - timedelta(seconds=1))
    with pytest.raises(letta_client.AuthenticationError):
        browser.agents.retrieve(agent.id)
    again = client.access_tokens.create(hostname=APP, policy=policy)
    client.access_tokens.delete(again.token)
    with pytest.raises(letta_client.AuthenticationError):
        _browser(live_server, again.token).agents.retrieve(agent.id)
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.access_tokens.create(hostname=APP, policy=policy, expires_at="2000-01-01T00:00:00Z")
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.access_tokens.create(hostname="chat.example.com", policy=policy)


def test_list_and_another_account(client, live_server, agents, other_account):
    first, second = agents
    one = client.access_tokens.create(
        hostname=APP, policy=[{"id": first.id, "type": "agent", "access": ["read_agent"]}]
    )
    two = client.access_tokens.create(
        hostname=APP, policy=[{"id": second.id, "type": "agent", "access": ["read_agent"]}]
    )
    listed = client.access_tokens.list()
    assert [t.token for t in listed.tokens] == [two.token, one.token] and not listed.has_next_page
    assert [t.token for t in client.access_tokens.list(agent_id=first.id).tokens] == [one.token]
    page = client.access_tokens.list(limit=1)
    assert [t.token for t in page.tokens] == [two.token] and page.has_next_page
    other = Letta(base_url=live_server.url, api_key=other_account.token, max_retries=0)
    assert other.access_tokens.list().tokens == []
    with pytest.raises(letta_client.NotFoundError):
        other.access_tokens.delete(one.token)
    with pytest.raises(letta_client.NotFoundError):  # a token for someone else's agent
        other.access_tokens.create(hostname=APP, policy=[{"id": first.id, "type": "agent", "access": ["read_agent"]}])
    assert _browser(live_server, one.token).agents.retrieve(first.id).id == first.id


def test_a_browser_app_on_the_tokens_hostname_gets_cors(client, agents):
    from django.test import Client

    agent = agents[0]
    made = client.access_tokens.create(
        hostname=APP, policy=[{"id": agent.id, "type": "agent", "access": ["read_agent"]}]
    )
    browser = Client()
    preflight = browser.options(
        f"/v1/agents/{agent.id}",
        HTTP_ORIGIN=APP,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization",
    )
    assert preflight.status_code == 204 and preflight["Access-Control-Allow-Origin"] == APP
    assert "authorization" in preflight["Access-Control-Allow-Headers"]
    got = browser.get(f"/v1/agents/{agent.id}", HTTP_ORIGIN=APP, HTTP_AUTHORIZATION=f"Bearer {made.token}")
    assert got.status_code == 200 and got["Access-Control-Allow-Origin"] == APP
    stranger = browser.options(f"/v1/agents/{agent.id}", HTTP_ORIGIN="https://evil.example")
    assert "Access-Control-Allow-Origin" not in stranger
    ClientSideToken.objects.all().delete()  # no live token names the origin any more
    assert "Access-Control-Allow-Origin" not in browser.options(f"/v1/agents/{agent.id}", HTTP_ORIGIN=APP)
