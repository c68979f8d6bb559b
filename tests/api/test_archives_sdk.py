"""Shared archives (Letta's routers/v1/archives.py, schemas/archive.py) through the official letta-client SDK: CRUD,
an archive attached to several agents, what one agent stores found by every other (by full text and by vector),
passages written straight into the archive, detaching, another account's ids answering 404; an agent without an
archive keeps its own archival memory."""

import letta_client
import pytest
from letta_client import Letta

from memory.models import Passage
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)

EMBEDDING = "openai/text-embedding-3-small"


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


def _agent(client, name, **more):
    return client.agents.create(name=name, model="openai/fake-model", agent_type="memgpt_v2_agent", **more)


def test_archive_crud_and_filters(client):
    first = client.archives.create(name="team", description="What the team knows", embedding=EMBEDDING)
    assert first.id.startswith("archive-") and first.embedding_config.handle == EMBEDDING
    assert first.vector_db_provider == "native" and first.description == "What the team knows"
    second = client.archives.create(name="other")
    assert [a.id for a in client.archives.list()] == [second.id, first.id]  # newest first
    assert [a.id for a in client.archives.list(name="team")] == [first.id]
    agent = _agent(client, "reader")
    client.agents.archives.attach(first.id, agent_id=agent.id)
    assert [a.id for a in client.archives.list(agent_id=agent.id)] == [first.id]
    assert [a.id for a in client.archives.list(order="asc", limit=1).items] == [first.id]
    renamed = client.archives.update(first.id, name="crew")
    assert renamed.name == "crew" and client.archives.retrieve(first.id).name == "crew"
    client.archives.delete(first.id)
    with pytest.raises(letta_client.NotFoundError):
        client.archives.retrieve(first.id)
    assert client.agents.retrieve(agent.id).id == agent.id  # its agents stay
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.archives.create(name="")


def test_what_one_agent_stores_every_attached_agent_finds(client, fake_llm, api):
    archive = client.archives.create(name="shared")
    writer, reader, loner = _agent(client, "writer"), _agent(client, "reader"), _agent(client, "loner")
    for agent in (writer, reader):
        client.agents.archives.attach(archive.id, agent_id=agent.id)
    fake_llm.script(
        FakeLLM.tool("archival_memory_insert", {"content": "The harbour gate code is 4417"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted"}),
    )
    client.agents.messages.create(writer.id, messages=[{"role": "user", "content": "remember the gate code"}])
    stored = Passage.objects.get(text="The harbour gate code is 4417")
    assert stored.archive_id == archive.id and stored.agent_id is None

    for agent in (writer, reader):  # listed and searched from each attached agent
        assert [p.text for p in client.agents.passages.list(agent.id)] == ["The harbour gate code is 4417"]
        hits = client.agents.passages.search(agent.id, query="gate code")
        assert [h.content for h in hits.results] == ["The harbour gate code is 4417"]
    assert list(client.agents.passages.list(loner.id)) == []

    direct = client.archives.passages.create(archive.id, text="Boats leave at dawn", tags=["schedule"])
    assert direct.archive_id == archive.id
    many = client.archives.passages.create_many(archive.id, passages=[{"text": "Nets dry on Sundays"}])
    assert [p.text for p in many] == ["Nets dry on Sundays"]
    tagged = client.agents.passages.search(reader.id, query="boats dawn", tags=["schedule"])
    assert [h.content for h in tagged.results] == ["Boats leave at dawn"]

    fake_llm.script(
        FakeLLM.tool("archival_memory_search", {"query": "dawn"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "At dawn"}),
    )
    client.agents.messages.create(reader.id, messages=[{"role": "user", "content": "when do boats leave?"}])
    assert "Boats leave at dawn" in str(fake_llm.chat_requests[-1]["messages"][-3:])  # the tool's return

    loner_own = client.agents.passages.create(loner.id, text="Only mine")  # no archive: its own memory, as before
    assert loner_own[0].agent_id == loner.id and loner_own[0].archive_id is None
    assert "Only mine" not in [p.text for p in client.agents.passages.list(reader.id)]

    client.agents.archives.detach(archive.id, agent_id=reader.id)
    assert list(client.agents.passages.list(reader.id)) == []
    assert len(list(client.agents.passages.list(writer.id))) == 3
    client.archives.passages.delete(direct.id, archive_id=archive.id)
    assert "Boats leave at dawn" not in [p.text for p in client.agents.passages.list(writer.id)]
    client.agents.passages.delete(many[0].id, agent_id=writer.id)  # an attached agent may delete one too
    assert [p.text for p in client.agents.passages.list(writer.id)] == ["The harbour gate code is 4417"]


def test_vector_search_reaches_the_archive(client, fake_llm):
    archive = client.archives.create(name="vectors", embedding=EMBEDDING)
    agents = [_agent(client, f"a{i}", embedding=EMBEDDING) for i in range(2)]
    for agent in agents:
        client.agents.archives.attach(archive.id, agent_id=agent.id)
    client.agents.passages.create(agents[0].id, text="Lighthouse keepers log the weather")
    client.archives.passages.create(archive.id, text="Ferries need a ticket")
    rows = Passage.objects.filter(archive_id=archive.id)
    assert rows.count() == 2 and all(p.embedding_model == EMBEDDING for p in rows)
    for agent in agents:
        hits = client.agents.passages.search(agent.id, query="weather log")
        assert hits.results[0].content == "Lighthouse keepers log the weather"


def test_another_accounts_archives_are_not_found(client, live_server, other_account):
    archive = client.archives.create(name="private")
    mine = _agent(client, "mine")
    client.archives.passages.create(archive.id, text="secret")
    other = Letta(base_url=live_server.url, api_key=other_account.token, max_retries=0)
    theirs = _agent(other, "theirs")
    assert list(other.archives.list()) == []
    for call in (
        lambda: other.archives.retrieve(archive.id),
        lambda: other.archives.update(archive.id, name="x"),
        lambda: other.archives.delete(archive.id),
        lambda: other.archives.passages.create(archive.id, text="x"),
        lambda: other.agents.archives.attach(archive.id, agent_id=theirs.id),
        lambda: other.agents.archives.attach(archive.id, agent_id=mine.id),
        lambda: list(other.archives.list(agent_id=mine.id)),
    ):
        with pytest.raises(letta_client.NotFoundError):
            call()
    assert list(other.agents.passages.list(theirs.id)) == []
    assert client.archives.retrieve(archive.id).name == "private"
