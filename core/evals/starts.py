"""An experiment run's starting states, each read once and copied for its cases in a few INSERTs.

The first case that starts from a state (the target agent as it is or at a version, or a fork of it at a step; with
the run's model and prompt or block overrides) has its copy made the thorough way (core.evals.runner.case_copy:
core.runs.timetravel's copy, the version applied, the overrides validated and written, its first version recorded).
That copy is then read back once, every row prepared for the database once, and each further case starting there
gets a copy of those rows: the agent, its tags and tool links, its messages (with their original times), blocks and
their links, passages and their tags, and its first version, one INSERT per table in one transaction, the definition
neither validated nor rendered again. A case's own agent file is imported anew for each case, as before.
"""

import threading
from collections import Counter
from collections.abc import Hashable
from datetime import datetime

from django.db import connection, models, transaction
from django.utils import timezone

from core.agents import versions
from core.models import Agent, AgentTag, AgentVersion, Message
from memory.models import AgentBlock, Block, Passage, PassageTag
from tools.models import Tool

_AUTO = (models.AutoField, models.BigAutoField, models.SmallAutoField)


class Rows:
    """Rows of one model, each value prepared for the database once (`Field.get_db_prep_save`); `insert` writes
    them again with the columns named in `vary` replaced, in one statement per batch, without compiling a query.
    An auto-incremented primary key is left to the database."""

    def __init__(self, model: type[models.Model], objs: list, vary: tuple[str, ...]):
        fields = [f for f in model._meta.concrete_fields if not isinstance(f, _AUTO)]
        quote = connection.ops.quote_name
        self.head = f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) VALUES "
        self.row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        self.width = len(fields)
        self.fields = {f.attname: f for f in fields}
        self.at = [list(self.fields).index(name) for name in vary]
        self.rows = [[f.get_db_prep_save(getattr(obj, f.attname), connection) for f in fields] for obj in objs]

    def prepared(self, name: str, value):
        """`value` as the column `name` is written."""
        return self.fields[name].get_db_prep_save(value, connection)

    def insert(self, cursor, values: list[tuple]) -> None:
        """Insert every row with its `vary` columns set to the next tuple of `values` (prepared, in `vary`'s order)."""
        if not self.rows:
            return
        out = []
        for row, varied in zip(self.rows, values, strict=True):
            row = list(row)
            for i, value in zip(self.at, varied, strict=True):
                row[i] = value
            out.append(row)
        size = max(1, connection.ops.bulk_batch_size([None] * self.width, out))
        for start in range(0, len(out), size):
            batch = out[start : start + size]
            cursor.execute(self.head + ", ".join([self.row] * len(batch)), [v for row in batch for v in row])


class Start:
    """A starting state read once from `template`, a case's copy made the thorough way before its turns ran."""

    def __init__(self, template: Agent, source_name: str):
        agent = Agent.objects.get(pk=template.pk)
        self.agent, self.source_name = agent, source_name
        self.agent_row = Rows(Agent, [agent], ("id", "name", "metadata", "message_ids", "created_at", "updated_at"))
        self.tags = Rows(AgentTag, list(AgentTag.objects.filter(agent=agent).order_by("id")), ("agent_id",))
        through = Tool.agents.through
        self.tools = Rows(through, list(through.objects.filter(agent_id=agent.id).order_by("id")), ("agent_id",))
        messages = list(Message.objects.filter(agent=agent).order_by("seq"))
        self.message_ids = [m.id for m in messages]
        self.messages = Rows(Message, messages, ("id", "agent_id"))
        links = list(AgentBlock.objects.filter(agent=agent).select_related("block").order_by("position", "id"))
        self.blocks = Rows(Block, [link.block for link in links], ("id",))
        self.links = Rows(AgentBlock, links, ("agent_id", "block_id"))
        passages = list(Passage.objects.filter(agent=agent).order_by("created_at", "id"))
        self.passage_ids = [p.id for p in passages]
        self.passages = Rows(Passage, passages, ("id", "agent_id"))
        tags = list(PassageTag.objects.filter(passage__in=passages).order_by("id"))
        self.passage_tags = Rows(PassageTag, tags, ("passage_id", "agent_id"))
        self.passage_tag_of = [p.passage_id for p in tags]
        self.version = AgentVersion.objects.filter(agent=agent).order_by("-number").first()
        if self.version is not None:
            vary = ("agent_id", "content_hash", "definition", "created_at")
            self.version_row = Rows(AgentVersion, [self.version], vary)

    def copy(self, *, name: str, marker: dict, agent_id: str | None = None) -> Agent:
        """A copy of the state named `name`, `marker` set in its metadata, its id `agent_id` (None: a new one): its
        rows written in one transaction, each table in one INSERT. Returns the copy as stored."""
        name, metadata = name[:200], {**(self.agent.metadata or {}), **marker}
        new = {
            "agent": agent_id or Agent._meta.pk.get_default(),
            "messages": {i: Message._meta.pk.get_default() for i in self.message_ids},
            "passages": {i: Passage._meta.pk.get_default() for i in self.passage_ids},
        }
        blocks = [Block._meta.pk.get_default() for _ in self.blocks.rows]
        agent_id, now = new["agent"], timezone.now()
        message_ids = [new["messages"].get(i, i) for i in self.agent.message_ids or []]
        row = self.agent_row
        at = row.prepared("created_at", now)
        with transaction.atomic(), connection.cursor() as cursor:
            row.insert(
                cursor,
                [
                    (
                        agent_id,
                        name,
                        row.prepared("metadata", metadata),
                        row.prepared("message_ids", message_ids),
                        at,
                        at,
                    )
                ],
            )
            self.tags.insert(cursor, [(agent_id,)] * len(self.tags.rows))
            self.tools.insert(cursor, [(agent_id,)] * len(self.tools.rows))
            self.messages.insert(cursor, [(new["messages"][i], agent_id) for i in self.message_ids])
            self.blocks.insert(cursor, [(b,) for b in blocks])
            self.links.insert(cursor, [(agent_id, b) for b in blocks])
            self.passages.insert(cursor, [(new["passages"][i], agent_id) for i in self.passage_ids])
            self.passage_tags.insert(cursor, [(new["passages"][i], agent_id) for i in self.passage_tag_of])
            copy = self._agent(agent_id, name, metadata, message_ids, now)
            if self.version is not None:
                definition = versions.copy_definition(self.version.definition, copy)
                hashed = versions.definition_hash(definition)
                version = self.version_row
                version.insert(cursor, [(agent_id, hashed, version.prepared("definition", definition), at)])
        return copy

    def _agent(self, agent_id: str, name: str, metadata: dict, message_ids: list[str], now: datetime) -> Agent:
        """The copy's row as an Agent loaded from the database (Model.from_db), without reading it."""
        names = [f.attname for f in Agent._meta.concrete_fields]
        values = {n: getattr(self.agent, n) for n in names}
        values.update(
            id=agent_id, name=name, metadata=metadata, message_ids=message_ids, created_at=now, updated_at=now
        )
        return Agent.from_db(connection.alias, names, [values[n] for n in names])


class Starts:
    """The starting states the cases of one run share, by key (core.evals.runner.start_key): `counts` says how many
    cases start from each; a state only one case starts from is not read back (its copy is all it needs)."""

    def __init__(self, counts: Counter):
        self.counts = counts
        self.found: dict[Hashable, Start] = {}
        self.locks: dict[Hashable, threading.Lock] = {}
        self.lock = threading.Lock()

    def copy(self, key: Hashable, make, *, name, marker: dict, agent_id: str | None = None) -> Agent:
        """A copy of the state `key` names: the first is `make()`'s (it returns the copy and its source's name; the
        copy is then read back as the state), the next ones copies of what it read, named `name(source's name)`, with
        the id `agent_id` (None: a new one). Cases running at once wait for the first."""
        if key is None or self.counts.get(key, 0) < 2:
            return make()[0]
        with self.lock:
            lock = self.locks.setdefault(key, threading.Lock())
        with lock:
            start = self.found.get(key)
            if start is None:
                first, source_name = make()
                self.found[key] = Start(first, source_name)
                return first
        return start.copy(name=name(start.source_name), marker=marker, agent_id=agent_id)
