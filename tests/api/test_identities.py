"""Identities (Letta's routers/v1/identities.py, schemas/identity.py): CRUD, upsert by identifier key, properties,
list filters, the agents serving one; an agent per end user found by its key through the official letta-client SDK
(`agents.identities` attach/detach, `agents.list(identifier_keys=…)`); another account's ids answer 404."""

import letta_client
import pytest
from letta_client import Letta

from core.models import Identity
from tests.factories import ApiClient, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = {"identifier_key": "user-alice", "name": "Alice", "identity_type": "user"}


def test_create_retrieve_update_and_delete(api, account):
    agent = make_agent(account.org, name="helper")
    r = api.post(
        "/v1/identities/",
        {**ALICE, "agent_ids": [agent.id], "properties": [{"key": "plan", "value": "pro", "type": "string"}]},
    )
    assert r.status_code == 200, r.json()
    alice = r.json()
    assert alice["id"].startswith("identity-") and alice["agent_ids"] == [agent.id] and alice["project_id"] is None
    assert alice["organization_id"] and alice["block_ids"] == []
    assert api.get(f"/v1/identities/{alice['id']}").json() == alice
    again = api.post("/v1/identities/", {**ALICE, "name": "Other Alice"})
    assert again.status_code == 409 and "user-alice" in again.json()["detail"]
    assert api.post("/v1/identities/", {**ALICE, "project_id": "p2"}).status_code == 200  # keys are per project

    props = [{"key": "age", "value": 31, "type": "number"}]
    changed = api.patch(f"/v1/identities/{alice['id']}", {"name": "Alice B.", "properties": props}).json()
    assert changed["name"] == "Alice B." and [p["key"] for p in changed["properties"]] == ["plan", "age"]  # merged
    replaced = api.put(f"/v1/identities/{alice['id']}/properties", [{"key": "vip", "value": True, "type": "boolean"}])
    assert replaced.json()["properties"] == [{"key": "vip", "value": True, "type": "boolean"}]
    bad = api.put(f"/v1/identities/{alice['id']}/properties", [{"key": "age", "value": "old", "type": "number"}])
    assert bad.status_code == 422 and "age" in bad.json()["detail"]
    assert api.patch(f"/v1/identities/{alice['id']}", {"agent_ids": ["agent-missing"]}).status_code == 404
    assert api.get("/v1/identities/count").json() == 2

    assert api.delete(f"/v1/identities/{alice['id']}").status_code == 200
    assert api.get(f"/v1/identities/{alice['id']}").status_code == 404
    assert api.get(f"/v1/agents/{agent.id}").status_code == 200  # its agents stay


def test_upsert_replaces_the_identity_with_that_key(api, account):
    first, second = make_agent(account.org, name="a"), make_agent(account.org, name="b")
    made = api.put("/v1/identities/", {**ALICE, "agent_ids": [first.id]}).json()
    upserted = api.put(
        "/v1/identities/", {**ALICE, "name": "Alice Again", "identity_type": "other", "agent_ids": [second.id]}
    ).json()
    assert upserted["id"] == made["id"] and upserted["name"] == "Alice Again"
    assert upserted["identity_type"] == "other" and upserted["agent_ids"] == [second.id]  # replaced, not added
    added = api.patch(f"/v1/identities/{made['id']}", {"agent_ids": [first.id]}).json()
    assert set(added["agent_ids"]) == {first.id, second.id}  # PATCH adds, as Letta's replace=False
    assert Identity.objects.count() == 1


def test_list_filters_and_the_agents_of_an_identity(api, account):
    agent = make_agent(account.org, name="served")
    ids = {}
    for key, kind, project in (("u1", "user", ""), ("u2", "user", "proj"), ("acme", "org", "")):
        body = {"identifier_key": key, "name": key.upper(), "identity_type": kind, "project_id": project or None}
        ids[key] = api.post("/v1/identities/", body).json()["id"]

    def keys(query: str) -> list[str]:
        return [i["identifier_key"] for i in api.get(f"/v1/identities/?{query}").json()]

    assert keys("") == ["acme", "u2", "u1"]  # newest first
    assert keys("order=asc&limit=2") == ["u1", "u2"]
    assert keys("identity_type=user&order=asc") == ["u1", "u2"]
    assert keys("identifier_key=acme") == ["acme"] and keys("project_id=proj") == ["u2"] and keys("name=U1") == ["u1"]
    assert api.get("/v1/identities/?identity_type=robot").status_code == 422
    api.patch(f"/v1/agents/{agent.id}/identities/attach/{ids['acme']}")
    assert [a["id"] for a in api.get(f"/v1/identities/{ids['acme']}/agents").json()] == [agent.id]
    assert api.get(f"/v1/identities/{ids['u1']}/agents").json() == []
    assert api.get(f"/v1/identities/{ids['u1']}/blocks").json() == []


def test_another_accounts_identities_are_not_found(api, account, other_account):
    mine = api.post("/v1/identities/", ALICE).json()
    agent = make_agent(account.org)
    mallory = ApiClient(other_account.token)
    their_agent = make_agent(other_account.org)
    assert mallory.get("/v1/identities/").json() == []
    for r in (
        mallory.get(f"/v1/identities/{mine['id']}"),
        mallory.patch(f"/v1/identities/{mine['id']}", {"name": "x"}),
        mallory.delete(f"/v1/identities/{mine['id']}"),
        mallory.get(f"/v1/identities/{mine['id']}/agents"),
        mallory.patch(f"/v1/agents/{their_agent.id}/identities/attach/{mine['id']}"),
        mallory.patch(f"/v1/agents/{agent.id}/identities/attach/{mine['id']}"),
        mallory.put("/v1/identities/", {**ALICE, "agent_ids": [agent.id]}),
    ):
        assert r.status_code == 404, r.content
    assert mallory.post("/v1/identities/", ALICE).status_code == 200  # the same key is free in another account
    assert api.get(f"/v1/identities/{mine['id']}").json()["name"] == "Alice"


def test_an_agent_per_end_user_through_the_sdk(live_server, api, account, other_account, fake_llm):
    client = Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)
    users = {key: api.post("/v1/identities/", {**ALICE, "identifier_key": key}).json()["id"] for key in ("u-1", "u-2")}
    agents = {"u-1": client.agents.create(name="for-u-1", model="openai/fake-model", identity_ids=[users["u-1"]]).id}
    agent = client.agents.create(name="for-u-2", model="openai/fake-model")
    client.agents.identities.attach(users["u-2"], agent_id=agent.id)
    agents["u-2"] = agent.id
    with pytest.raises(letta_client.NotFoundError):
        client.agents.create(name="for-nobody", model="openai/fake-model", identity_ids=["identity-missing"])
    client.agents.create(name="nobody's", model="openai/fake-model")
    assert [a.id for a in client.agents.list(identifier_keys=["u-2"])] == [agents["u-2"]]
    assert {a.id for a in client.agents.list(identifier_keys=["u-1", "u-2"])} == set(agents.values())
    assert [a.id for a in client.agents.list(identity_id=users["u-1"])] == [agents["u-1"]]
    assert len(list(client.agents.list())) == 3  # the refused create made nothing
    client.agents.identities.detach(users["u-1"], agent_id=agents["u-1"])
    assert list(client.agents.list(identifier_keys=["u-1"])) == []
    other = Letta(base_url=live_server.url, api_key=other_account.token, max_retries=0)
    assert list(other.agents.list(identifier_keys=["u-2"])) == []
    with pytest.raises(letta_client.NotFoundError):
        other.agents.identities.attach(users["u-2"], agent_id=agents["u-2"])
