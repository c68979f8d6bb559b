"""Agent versions: immutable snapshots of an agent's definition (tools' code included) and their diffs.

Every write of a definition calls `version_record` inside its transaction; a version is written only when the
definition's hash changed, so a no-op save writes nothing. Who made the change comes from `authored_by(...)` if
a caller set it, else from the request being served (VersionAuthorMiddleware), else "system"; why, from the
writer's own description unless a person's note was given with `noted(...)` (the IDE's "Version note", the API's
`version_message`).
"""

import difflib
import hashlib
import json
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Max, OuterRef, Subquery
from django.utils import timezone

from core.agents import agent_tests
from core.errors import Invalid, NotFound
from core.models import Agent, AgentVersion, Experiment, ToolVersion
from core.selectors import agent_tags
from memory.selectors import agent_blocks
from tools.selectors import agent_tools

# The definition's fields besides tools and tags, in the order the IDE shows them.
FIELDS = (
    "name",
    "description",
    "agent_type",
    "system",
    "model",
    "model_settings",
    "context_window_limit",
    "embedding",
    "tool_rules",
    "max_steps",
    "overflow_strategy",
    "metadata",
)
TEXT_FIELDS = ("system", "description")
_TOOL_CODE = ("name", "tool_type", "source_code", "json_schema", "pip_requirements")
_TOOL_REFS = ("tool_id", "tool_version")
# Metadata keys that are the agent's data, not its definition: saving a test is not a new version of the agent.
METADATA_NOT_DEFINITION = ("agent_tests",)  # where the code lives on this server: not part of the hash
MAX_MESSAGE = 500


@dataclass(frozen=True)
class Author:
    kind: str  # user | token | agent | system
    name: str = ""


_author: ContextVar[Author | None] = ContextVar("version_author", default=None)
_request: ContextVar = ContextVar("version_request", default=None)
_paused: ContextVar[bool] = ContextVar("versions_paused", default=False)
_note: ContextVar[str] = ContextVar("version_note", default="")


@contextmanager
def authored_by(author: Author):
    """Versions recorded inside this block name `author` (an agent step, a management command...)."""
    token = _author.set(author)
    try:
        yield
    finally:
        _author.reset(token)


@contextmanager
def noted(message: str | None):
    """Versions recorded inside this block carry `message` (a person's note on why) in place of the writer's own
    description ("attached x", "tool x changed"); an empty note changes nothing."""
    token = _note.set((message or "").strip()[:MAX_MESSAGE])
    try:
        yield
    finally:
        _note.reset(token)


@contextmanager
def serving(request):
    """Versions recorded while serving `request` name its API token or signed-in user (see the middleware)."""
    token = _request.set(request)
    try:
        yield
    finally:
        _request.reset(token)


@contextmanager
def recording_paused():
    token = _paused.set(True)
    try:
        yield
    finally:
        _paused.reset(token)


def current_author() -> Author:
    """Who is changing things now: the explicit author, else the request's token or user, else the system."""
    if (author := _author.get()) is not None:
        return author
    request = _request.get()
    principal = getattr(request, "principal", None)
    token = getattr(principal, "token", None)
    if token is not None:
        return Author("agent" if token.agent_id else "token", token.name)
    user = principal.user if principal is not None else getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Author("user", user.get_username())
    return Author("system", "")


# --------------------------------------------------------------------------- snapshots


def _hash(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _latest_tool_versions(tools) -> dict[str, ToolVersion]:
    """Each tool's newest version, in one query."""
    newest = ToolVersion.objects.filter(tool=OuterRef("tool")).order_by("-number").values("number")[:1]
    return {tv.tool_id: tv for tv in ToolVersion.objects.filter(tool__in=list(tools), number=Subquery(newest))}


def tool_version_current(*, tool, latest: ToolVersion | None = None, known: bool = False) -> ToolVersion:
    """The tool's latest version, first writing a new one if its code changed since (locks nothing).
    `known`: the caller passes `latest` as already read (None: the tool has no version yet)."""
    code = {
        "name": tool.name,
        "tool_type": tool.tool_type,
        "source_code": tool.source_code,
        "json_schema": tool.json_schema or {},
        "pip_requirements": tool.pip_requirements or [],
    }
    digest = _hash(code)
    if not known:
        latest = ToolVersion.objects.filter(tool=tool).order_by("-number").first()
    if latest is not None and latest.content_hash == digest:
        return latest
    return ToolVersion.objects.create(
        tool=tool, number=(latest.number + 1) if latest else 1, content_hash=digest, snapshot=code
    )


def agent_definition(*, agent: Agent) -> dict:
    """The agent's definition as plain JSON (fields, sorted tags, secret names, tools with their code); writes
    a ToolVersion for a tool whose code changed."""

    out = {key: getattr(agent, key) for key in FIELDS}
    out["metadata"] = {k: v for k, v in (agent.metadata or {}).items() if k not in METADATA_NOT_DEFINITION}
    out["tags"] = sorted(agent_tags(agent))
    out["secret_names"] = sorted(agent.secrets or {})  # values are secrets: never snapshotted
    tools = []
    attached = sorted(agent_tools(agent=agent), key=lambda t: t.name)
    latest = _latest_tool_versions(attached)
    for tool in attached:
        tv = tool_version_current(tool=tool, latest=latest.get(tool.id), known=True)
        tools.append({**tv.snapshot, "tool_id": tool.id, "tool_version": tv.number})
    out["tools"] = tools
    return out


def definition_hash(definition: dict) -> str:
    """The content hash of a definition: the same definition hashes the same on any server."""
    tools = [{k: v for k, v in t.items() if k not in _TOOL_REFS} for t in definition.get("tools", [])]
    return _hash({**definition, "tools": tools})


def _blocks(agent: Agent) -> list[dict]:
    return [{"label": b.label, "value": b.value, "limit": b.limit} for b in agent_blocks(agent=agent)]


def version_record(
    *, agent: Agent, message: str = "", author: Author | None = None, restored_from: int | None = None
) -> AgentVersion | None:
    """Write a new version if the agent's definition changed since its latest; None otherwise.

    Call inside the transaction of the write; takes the agent's row lock so numbers stay dense.
    """
    if _paused.get():
        return None
    with transaction.atomic():
        Agent.objects.select_for_update().filter(pk=agent.pk).first()
        definition = agent_definition(agent=agent)
        digest = definition_hash(definition)
        latest = AgentVersion.objects.filter(agent=agent).order_by("-number").only("number", "content_hash").first()
        if latest is not None and latest.content_hash == digest and restored_from is None:
            return None
        author = author or current_author()
        return AgentVersion.objects.create(
            agent=agent,
            number=(latest.number + 1) if latest else 1,
            content_hash=digest,
            definition=definition,
            blocks=_blocks(agent),
            author_kind=author.kind,
            author=author.name[:200],
            message=(_note.get() or message or "")[:MAX_MESSAGE],
            restored_from=restored_from,
            created_at=timezone.now(),
        )


def version_current(*, agent: Agent) -> AgentVersion:
    """The version the agent is at now: its latest, since every write of a definition records one in its own
    transaction (one indexed read: every run asks). An agent without any yet gets its first recorded here."""
    latest = AgentVersion.objects.filter(agent=agent).only("id", "number").order_by("-number").first()
    return latest or version_record(agent=agent)


def version_record_copy(*, copy: Agent, source: Agent) -> AgentVersion | None:
    """Record a fresh copy's first version from its source's latest: a copy has the source's tools (with their
    code), tags and secret names, so only its own fields and metadata are read, not its tools again (an eval case
    makes a copy each). The copy is fresh: it has no version yet. None when the source has none (the copy's first run
    then records one)."""
    latest = AgentVersion.objects.filter(agent=source).only("definition").order_by("-number").first()
    if latest is None:
        return None
    definition = copy_definition(latest.definition, copy)
    return AgentVersion.objects.create(
        agent=copy,
        number=1,
        content_hash=definition_hash(definition),
        definition=definition,
        blocks=_blocks(copy),
        author_kind="system",
        message=f"copy of {source.name}"[:MAX_MESSAGE],
        created_at=timezone.now(),
    )


def copy_definition(definition: dict, copy: Agent) -> dict:
    """The definition of a copy of an agent whose definition is `definition`: the same tools (with their code), tags
    and secret names, with the copy's own fields and metadata."""
    out = {**definition, **{key: getattr(copy, key) for key in FIELDS}}
    out["metadata"] = {k: v for k, v in (copy.metadata or {}).items() if k not in METADATA_NOT_DEFINITION}
    return out


def tool_changed(*, tool, message: str = "") -> None:
    """A tool's code changed: write its ToolVersion and a version of every agent that uses it."""
    tool_version_current(tool=tool)
    for agent in Agent.objects.filter(tools=tool):
        version_record(agent=agent, message=message or f"tool {tool.name} changed")


def agents_record(*, agents: list[Agent], message: str) -> None:
    """Record a version of each agent (after a write that touched several, e.g. a deleted tool)."""
    for agent in agents:
        version_record(agent=agent, message=message)


def on_agent_tools_changed(sender, *, agents: list[Agent], message: str, **kwargs) -> None:
    """Receiver of tools.signals.agent_tools_changed (connected in CoreConfig.ready)."""
    agents_record(agents=agents, message=message)


def on_tool_code_changed(sender, *, tool, **kwargs) -> None:
    """Receiver of tools.signals.tool_code_changed (connected in CoreConfig.ready)."""
    tool_changed(tool=tool)


# --------------------------------------------------------------------------- reads


def versions_list(*, agent: Agent) -> list[AgentVersion]:
    """The agent's versions, newest first."""
    return list(AgentVersion.objects.filter(agent=agent).order_by("-number"))


def version_get(*, agent: Agent, number: int) -> AgentVersion:
    """One version of the agent; NotFound if it has no such number."""
    version = AgentVersion.objects.filter(agent=agent, number=number).first()
    if version is None:
        raise NotFound(f"Agent '{agent.id}' has no version {number}")
    return version


def _text_diff(before: str, after: str, name: str, old: int, new: int) -> list[str]:
    return list(
        difflib.unified_diff(
            (before or "").splitlines(),
            (after or "").splitlines(),
            fromfile=f"{name}@v{old}",
            tofile=f"{name}@v{new}",
            lineterm="",
        )
    )


def definitions_diff(before: dict, after: dict, *, old: int = 0, new: int = 0) -> list[dict]:
    """Field by field changes from `before` to `after`: text fields and tool sources as unified diffs."""
    changes = []
    for key in (*FIELDS, "tags", "secret_names"):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        change = {"field": key, "before": a, "after": b}
        if key in TEXT_FIELDS:
            change["diff"] = _text_diff(a, b, key, old, new)
        changes.append(change)
    tools_a = {t["name"]: t for t in before.get("tools", [])}
    tools_b = {t["name"]: t for t in after.get("tools", [])}
    for name in sorted(set(tools_a) | set(tools_b)):
        a, b = tools_a.get(name), tools_b.get(name)
        if a is None or b is None:
            changes.append(
                {
                    "field": f"tools.{name}",
                    "change": "attached" if a is None else "detached",
                    "before": a and a.get("tool_version"),
                    "after": b and b.get("tool_version"),
                }
            )
            continue
        fields = [k for k in _TOOL_CODE if a.get(k) != b.get(k)]
        if fields:
            changes.append(
                {
                    "field": f"tools.{name}",
                    "change": "code",
                    "fields": fields,
                    "before": a.get("tool_version"),
                    "after": b.get("tool_version"),
                    "diff": _text_diff(a.get("source_code"), b.get("source_code"), f"{name}.py", old, new),
                }
            )
    return changes


def version_diff(*, agent: Agent, number: int, against: int | None = None) -> dict:
    """What changed from version `against` (default: the one before) to version `number`."""
    version = version_get(agent=agent, number=number)
    against = number - 1 if against is None else against
    if against < 0:
        raise Invalid("against must be a version number (0: compare with nothing)")
    base = version_get(agent=agent, number=against).definition if against >= 1 else {}
    return {
        "number": number,
        "against": against,
        "changes": definitions_diff(base, version.definition, old=against, new=number),
    }


# --------------------------------------------------------------------------- agent files


def history_export(*, agent: Agent) -> list[dict]:
    """The agent's versions, oldest first, as plain data for an agent file."""
    return [
        {
            "number": v.number,
            "definition": v.definition,
            "blocks": v.blocks,
            "author_kind": v.author_kind,
            "author": v.author,
            "message": v.message,
            "restored_from": v.restored_from,
            "created_at": v.created_at.isoformat(),
        }
        for v in reversed(versions_list(agent=agent))
    ]


def history_import(*, agent: Agent, history: list[dict]) -> None:
    """Replace a just-imported agent's versions with a file's history, then record the import on top if the
    definition differs from the file's last version. Invalid if the history is malformed."""
    rows = []
    for i, item in enumerate(history):
        definition = item.get("definition") if isinstance(item, dict) else None
        tools = definition.get("tools", []) if isinstance(definition, dict) else None
        if (
            not isinstance(tools, list)
            or any(not isinstance(t, dict) or not isinstance(t.get("name"), str) for t in tools)
            or any(not isinstance(definition.get(k, ""), str) for k in ("name", "system", "model", "description"))
        ):
            raise Invalid(f"agent history[{i}] must be an object with a definition (name, system, model as text)")
        try:
            created = datetime.fromisoformat(str(item.get("created_at")))
        except ValueError:
            created = timezone.now()
        if timezone.is_naive(created):
            created = timezone.make_aware(created)
        author_kind = item.get("author_kind") if item.get("author_kind") in dict(AgentVersion.AUTHORS) else "system"
        rows.append(
            AgentVersion(
                agent=agent,
                number=i + 1,
                definition=item["definition"],
                content_hash=definition_hash(item["definition"]),
                blocks=item.get("blocks") if isinstance(item.get("blocks"), list) else [],
                author_kind=author_kind,
                author=str(item.get("author") or "")[:200],
                message=str(item.get("message") or "")[:MAX_MESSAGE],
                restored_from=item.get("restored_from") if isinstance(item.get("restored_from"), int) else None,
                created_at=created,
            )
        )
    AgentVersion.objects.filter(agent=agent).delete()
    AgentVersion.objects.bulk_create(rows)
    version_record(agent=agent, message="imported from an agent file")


def latest_number(*, agent: Agent) -> int:
    """The number of the agent's newest version (0 if none)."""
    return AgentVersion.objects.filter(agent=agent).aggregate(n=Max("number"))["n"] or 0


def versions_with_tests(*, agent: Agent) -> list[dict]:
    """The timeline the IDE shows: each version (newest first) with the runs of the agent's tests (experiments of
    its tests dataset) recorded against it."""

    runs: dict[int, list] = {}
    found = Experiment.objects.filter(agent=agent, dataset__tests_of=agent, version_at_start__isnull=False)
    for run in found.order_by("-created_at").prefetch_related("results"):
        results = [r for r in run.results.all() if r.status in ("done", "error")]
        runs.setdefault(run.version_at_start, []).append(
            {
                "id": run.id,
                "status": agent_tests.run_status(run),
                "passed": sum(1 for r in results if r.passed),
                "failed": sum(1 for r in results if not r.passed),
                "created_at": run.created_at,
                "failures": [r.name or r.case_key for r in results if not r.passed],
            }
        )
    return [{"version": v, "test_runs": runs.get(v.number, [])} for v in versions_list(agent=agent)]
