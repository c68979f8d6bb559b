"""Writes to tools: custom tool CRUD, the built-in tools, attach/detach. (Running tools: tools.execution.)"""

import ast
import re
from functools import cache
from pathlib import Path
from typing import Any

from django.db import transaction

from core.engine.base_tools import (
    BASE_TOOL_NAMES,
    BASE_TOOL_SCHEMAS,
    CODE_TOOL_NAMES,
    CODE_TOOL_SCHEMAS,
    FILE_TOOL_NAMES,
    FILE_TOOL_SCHEMAS,
    LETTA_TYPE_OF_BASE,
    MEMORY_TOOL_SCHEMAS,
    MULTI_AGENT_TOOL_NAMES,
    MULTI_AGENT_TOOL_SCHEMAS,
    SLEEPTIME_TOOL_SCHEMAS,
    VOICE_TOOL_SCHEMAS,
    WEB_TOOL_SCHEMAS,
)
from core.errors import Conflict, DomainError, Invalid, NotFound
from core.models import Agent, Organization
from core.updates import model_update
from tools import json_schema as tool_schema
from tools import policy
from tools.models import Tool
from tools.signals import agent_tools_changed, tool_code_changed


def _builtin_schemas() -> dict[str, tuple[str, list[str], dict]]:
    """Each built-in tool's (stored tool_type, tags, schema). The web tools are stored as "base" rows tagged
    Letta's `letta_builtin` (their wire type); they are installed with the others but never attached by default."""
    out = {name: ("base", ["base"], schema) for name, schema in BASE_TOOL_SCHEMAS.items()}
    out |= {name: ("multi_agent", ["multi_agent"], schema) for name, schema in MULTI_AGENT_TOOL_SCHEMAS.items()}
    others = WEB_TOOL_SCHEMAS | FILE_TOOL_SCHEMAS | SLEEPTIME_TOOL_SCHEMAS | MEMORY_TOOL_SCHEMAS | CODE_TOOL_SCHEMAS
    out |= {
        name: ("base", [LETTA_TYPE_OF_BASE[name]], schema) for name, schema in (others | VOICE_TOOL_SCHEMAS).items()
    }
    return out


@cache
def _code_tools_source() -> str:
    """The source the code tools run in the sandbox (tools/code_tools_source.py, read as text, never imported)."""
    return (Path(__file__).parent / "code_tools_source.py").read_text()


def _builtin_source(name: str) -> str:
    return _code_tools_source() if name in CODE_TOOL_NAMES else ""


@transaction.atomic
def builtin_tools_ensure(*, owner: Organization) -> dict[str, Tool]:
    """Create or refresh the owner's rows for the built-in tools (base, multi-agent, web); returns them by name.
    Safe to run concurrently (a row another request just made is kept). A custom tool the owner made under a
    web tool's name before it was built in is left as it is, and returned under that name."""

    wanted = _builtin_schemas()
    existing = {t.name: t for t in Tool.objects.filter(owner=owner, name__in=list(wanted))}
    missing = [
        Tool(
            owner=owner,
            name=name,
            tool_type=kind,
            json_schema=schema,
            description=schema["description"],
            tags=tags,
            source_code=_builtin_source(name),
        )
        for name, (kind, tags, schema) in wanted.items()
        if name not in existing
    ]
    if missing:
        Tool.objects.bulk_create(missing, ignore_conflicts=True)
        existing |= {t.name: t for t in Tool.objects.filter(owner=owner, name__in=[t.name for t in missing])}
    for name, (_kind, tags, schema) in wanted.items():
        tool = existing[name]
        source = _builtin_source(name)
        if tool.tool_type != "custom" and (
            tool.json_schema != schema or tool.tags != tags or tool.source_code != source
        ):
            tool.json_schema, tool.description, tool.tags, tool.source_code = (
                schema,
                schema["description"],
                tags,
                source,
            )
            tool.save(update_fields=["json_schema", "description", "tags", "source_code", "updated_at"])
    return {name: existing[name] for name in wanted}


class ToolsNotFound(DomainError):
    """Tools named at agent create or update that the owner does not have: Letta's 400 and its text, which
    clients match (Letta Code installs the base tools and retries on /tools not found by name/i)."""

    status = 400


def _set_repr(values: list[str]) -> str:
    # Letta prints a Python set; written in request order here so the same request gives the same text.
    return "{" + ", ".join(repr(v) for v in dict.fromkeys(values)) + "}"


def agent_tools_resolve(
    *,
    owner: Organization,
    names: list[str],
    ids: list[str],
    include_base: bool = False,
    include_multi_agent: bool = False,
    without: tuple[str, ...] = (),
) -> list[Tool]:
    """The tools an agent is to have: built-ins as asked (less the base tools in `without`, e.g. send_message for
    a letta_v1_agent), then named and id'd tools; installs the built-ins if a name needs them. ToolsNotFound (400)
    for a name or id the owner has no tool for."""
    wanted: list[Tool] = []
    builtin_names = (*BASE_TOOL_NAMES, *MULTI_AGENT_TOOL_NAMES, *LETTA_TYPE_OF_BASE)
    if include_base or include_multi_agent or set(names) & set(builtin_names):
        builtins = builtin_tools_ensure(owner=owner)
        if include_base:
            wanted += [builtins[n] for n in BASE_TOOL_NAMES if n not in without]
        if include_multi_agent:
            wanted += [builtins[n] for n in MULTI_AGENT_TOOL_NAMES]
    by_name = {t.name: t for t in Tool.objects.filter(owner=owner, name__in=names)}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ToolsNotFound(f"Tools not found by name: {_set_repr(missing)}")
    by_id = {t.id: t for t in Tool.objects.filter(owner=owner, id__in=ids)}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ToolsNotFound(f"Tools not found by id:   {_set_repr(missing)}")
    return list(dict.fromkeys([*wanted, *by_name.values(), *by_id.values()]))


def agent_tools_set(*, agent: Agent, tools: list[Tool]) -> None:
    """Make `tools` the agent's whole tool set (Letta's `tool_ids` on update); the caller records the version."""
    agent.tools.set(tools)


@transaction.atomic
def tool_attach(*, agent: Agent, tool: Tool) -> None:
    """Attach a tool to an agent (idempotent); a tool whose default_requires_approval is set also gets the agent a
    requires_approval rule for it if it has none (Letta's attach_tool_async; locks the agent's row then)."""
    if tool.owner_id != agent.owner_id:
        raise NotFound(f"Tool '{tool.id}' not found")
    agent.tools.add(tool)
    if tool.default_requires_approval:
        _approval_rule_set(agent=agent, tool_name=tool.name, required=True)
    agent_tools_changed.send(sender=Tool, agents=[agent], message=f"attached {tool.name}")


def file_tools_sync(*, agent: Agent, attached: bool) -> None:
    """A folder was attached (`attached`) or the agent's last folder detached: it gets the file tools it lacks, or
    loses them (Letta's attach_missing_files_tools / detach_all_files_tools)."""
    tools = builtin_tools_ensure(owner=agent.owner)
    wanted = [tools[name] for name in FILE_TOOL_NAMES if tools[name].tool_type != "custom"]
    have = set(agent.tools.filter(pk__in=[t.pk for t in wanted]).values_list("pk", flat=True))
    change = [t for t in wanted if (t.pk in have) != attached]
    if not change:
        return
    (agent.tools.add if attached else agent.tools.remove)(*change)
    verb = "attached" if attached else "detached"
    agent_tools_changed.send(sender=Tool, agents=[agent], message=f"{verb} the file tools")


def rules_with_approval(rules: list[dict], tool_name: str, *, required: bool) -> list[dict]:
    """`rules` (Letta's JSON shapes) with a requires_approval rule for the tool added at the end if `required` and
    absent, or every one for it removed if not (Letta's modify_approvals_async); the others as they were."""

    def is_approval(rule) -> bool:
        return isinstance(rule, dict) and rule.get("type") == "requires_approval" and rule.get("tool_name") == tool_name

    rules = list(rules or [])
    if not required:
        return [r for r in rules if not is_approval(r)]
    if any(is_approval(r) for r in rules):
        return rules
    return [*rules, {"tool_name": tool_name, "type": "requires_approval"}]


def _approval_rule_set(*, agent: Agent, tool_name: str, required: bool) -> bool:
    """Add or remove the agent's requires_approval rule for the tool from its rules as stored now (the row locked:
    a concurrent rule write is not lost); whether they changed. Caller is in a transaction."""
    stored = Agent.objects.select_for_update().values_list("tool_rules", flat=True).get(pk=agent.pk)
    rules = rules_with_approval(stored, tool_name, required=required)
    agent.tool_rules = stored
    return bool(model_update(agent, fields=["tool_rules"], data={"tool_rules": rules}))


@transaction.atomic
def agent_tool_approval_set(*, agent: Agent, tool_name: str, requires_approval: bool) -> Agent:
    """Make the agent's calls to the tool wait for a person's approval, or not: adds or removes its
    requires_approval rule (the name is not checked against the agent's tools, as in Letta). Locks the agent's
    row; records a version when the rules changed."""
    if _approval_rule_set(agent=agent, tool_name=tool_name, required=requires_approval):
        state = "needs" if requires_approval else "no longer needs"
        agent_tools_changed.send(sender=Tool, agents=[agent], message=f"{tool_name} {state} approval")
    return agent


def tool_detach(*, agent: Agent, tool: Tool) -> None:
    """Detach a tool; the agent can no longer call it (the next compiled context omits it)."""
    agent.tools.remove(tool)
    agent_tools_changed.send(sender=Tool, agents=[agent], message=f"detached {tool.name}")


# --- custom tool CRUD ------------------------------------------------------------------------------

MAX_RETURN_CHAR_LIMIT = 1_000_000
_PIP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?$")
_PIP_VERSION_RE = re.compile(r"^(==|>=|<=|~=|!=|>|<)?\s*[A-Za-z0-9.*+!_-]+$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EDITABLE = (
    "source_code",
    "json_schema",
    "args_json_schema",
    "description",
    "tags",
    "return_char_limit",
    "pip_requirements",
    "sandbox",
    "env_vars",
    "allow_network",
    "default_requires_approval",
)


class ToolLocked(DomainError):
    """Built-in tools belong to the runtime; they can be attached and detached but not edited or deleted."""

    status = 403


def _reserved_names() -> set[str]:
    return set(BASE_TOOL_NAMES) | set(MULTI_AGENT_TOOL_NAMES) | set(LETTA_TYPE_OF_BASE)


def source_function_names(source_code: str) -> list[str]:
    """Names of the top-level functions in `source_code` (parsed, never executed); [] if it does not parse."""
    try:
        module = ast.parse(source_code)
    except SyntaxError:
        return []
    return [n.name for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


class SchemaConflict(DomainError):
    """A `json_schema`/`args_json_schema` the source cannot back (Letta answers 400, not 422)."""

    status = 400


def tool_schema_resolve(
    *,
    source_code: str,
    json_schema: dict | None = None,
    name: str | None = None,
    args_json_schema: dict | None = None,
    source_defines: bool = False,
) -> dict:
    """The tool's schema: `json_schema` if given, else built from `args_json_schema` and the source's function, else
    derived from the source (Invalid, or SchemaConflict for a given schema).

    A given `json_schema` names the tool and the function its runs call, whether or not the source defines it, as in
    Letta: create_or_update_tool_async (services/tool_manager.py) names the tool after it unchecked, and a run calls
    `<tool name>(...)` (services/tool_sandbox/base.py invoke_function_call), so a source without that function
    fails when run (NameError). Only with `source_defines` (new source code on update: Letta's update_tool_by_id_async
    refuses a schema its source does not define) must the source define it."""
    if not json_schema and args_json_schema:
        try:
            return tool_schema.schema_from_args(source_code, args_json_schema, name)
        except tool_schema.SchemaError as exc:
            raise SchemaConflict(str(exc), detail={"args_json_schema": str(exc)}) from exc
    if json_schema:
        if not isinstance(json_schema, dict) or not isinstance(json_schema.get("name"), str):
            raise SchemaConflict("json_schema must be an object with a 'name'", detail={"json_schema": "missing name"})
        fn = json_schema["name"]
        _check(lambda: tool_schema.validate_tool_name(fn), "json_schema")
        params = json_schema.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise SchemaConflict(
                "json_schema.parameters must be a JSON schema of type object",
                detail={"json_schema": "parameters must be an object schema"},
            )
        if source_defines and fn not in source_function_names(source_code):
            msg = f"json_schema names function {fn!r} but the source defines no top-level function with that name"
            raise SchemaConflict(msg, detail={"json_schema": msg})
        return {"description": "", **json_schema, "parameters": params}
    return _check(lambda: tool_schema.derive_schema(source_code, name), "source_code")


def _check(fn, field: str):
    try:
        return fn()
    except tool_schema.SchemaError as exc:
        raise Invalid(str(exc), detail={field: str(exc)}) from exc


def pip_requirements_clean(value: Any) -> list[dict]:
    """Validate `[{name, version?}]` (Letta's PipRequirement) and return it normalized; Invalid otherwise."""
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        raise Invalid("pip_requirements must be a list of {name, version?}")
    out = []
    for i, item in enumerate(value):
        item = {"name": item} if isinstance(item, str) else item
        name = item.get("name") if isinstance(item, dict) else None
        version = (item.get("version") or "") if isinstance(item, dict) else ""
        if not isinstance(name, str) or not _PIP_NAME_RE.match(name):
            raise Invalid(f"pip_requirements[{i}]: invalid package name {name!r}")
        if version and (not isinstance(version, str) or not _PIP_VERSION_RE.match(version)):
            raise Invalid(f"pip_requirements[{i}]: invalid version {version!r} (e.g. '2.32.3' or '>=2')")
        out.append({"name": name, "version": version} if version else {"name": name})
    return out


def pip_requirement_strings(requirements: list[dict]) -> list[str]:
    """`[{name, version?}]` as pip arguments (`requests==2.32.3`, `httpx>=0.27`)."""
    out = []
    for r in requirements or []:
        version = (r.get("version") or "").strip()
        out.append(r["name"] + (version if version[:1] in "=<>~!" and version else f"=={version}" if version else ""))
    return out


def env_vars_clean(value: Any) -> dict[str, str]:
    """Validate an env var mapping (identifier names, string values) and return it with values as strings."""
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise Invalid("env_vars must be an object of NAME: value")
    out = {}
    for key, val in value.items():
        if not isinstance(key, str) or not _ENV_NAME_RE.match(key):
            raise Invalid(f"env_vars: invalid variable name {key!r}")
        if isinstance(val, (dict, list)) or val is None or "\x00" in str(val):
            raise Invalid(f"env_vars: {key} must be a string")
        out[key] = str(val)
    return out


def _clean_fields(changes: dict) -> dict:
    """Validate the editable fields present in `changes` (everything but source/schema)."""
    out: dict[str, Any] = {}
    if changes.get("tags") is not None:
        tags = changes["tags"]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise Invalid("tags must be a list of strings")
        out["tags"] = tags
    if changes.get("return_char_limit") is not None:
        limit = changes["return_char_limit"]
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_RETURN_CHAR_LIMIT:
            raise Invalid(f"return_char_limit must be between 1 and {MAX_RETURN_CHAR_LIMIT}")
        out["return_char_limit"] = limit
    if "pip_requirements" in changes:
        out["pip_requirements"] = pip_requirements_clean(changes["pip_requirements"])
    if "sandbox" in changes:
        sandbox = changes["sandbox"] or ""
        if sandbox not in dict(Tool.SANDBOXES):
            raise Invalid("sandbox must be '' (deployment default), 'local' or 'e2b'")
        out["sandbox"] = sandbox
    if "env_vars" in changes:
        out["env_vars"] = env_vars_clean(changes["env_vars"])
    if "allow_network" in changes:
        if changes["allow_network"] not in (None, True, False):
            raise Invalid("allow_network must be true, false or null (the deployment default)")
        out["allow_network"] = changes["allow_network"]
    if "default_requires_approval" in changes:
        if changes["default_requires_approval"] not in (None, True, False):
            raise Invalid("default_requires_approval must be true, false or null")
        out["default_requires_approval"] = changes["default_requires_approval"]
    return out


def _apply(tool: Tool, *, schema: dict | None, source_code: str | None, description: str | None, fields: dict) -> Tool:
    if schema is not None:
        if description:
            schema = {**schema, "description": description}
        tool.name, tool.json_schema, tool.source_code = schema["name"], schema, source_code
        tool.description = schema.get("description", "")
    elif description is not None:
        tool.description = description
        tool.json_schema = {**(tool.json_schema or {}), "description": description}
    model_update(tool, fields=list(fields), data=fields, save=False)  # the caller saves the whole row
    return tool


def _name_free(*, owner: Organization, name: str, exclude_pk: str | None = None) -> None:
    if name in _reserved_names():
        raise Conflict(f"'{name}' is the name of a built-in tool")
    if Tool.objects.filter(owner=owner, name=name).exclude(pk=exclude_pk).exists():
        raise Conflict(f"A tool named '{name}' already exists")


@transaction.atomic
def tool_create(
    *,
    owner: Organization,
    source_code: str,
    json_schema: dict | None = None,
    args_json_schema: dict | None = None,
    description: str | None = None,
    tags: list[str] | None = None,
    return_char_limit: int | None = None,
    pip_requirements: list | None = None,
    sandbox: str = "",
    env_vars: dict | None = None,
    allow_network: bool | None = None,
    default_requires_approval: bool | None = None,
) -> Tool:
    """Create a custom tool from source (schema derived unless given); Conflict (409) if the name is taken,
    Forbidden (403) if it asks for network the operator does not permit the account."""
    policy.network_check(owner, allow_network)
    schema = tool_schema_resolve(source_code=source_code, json_schema=json_schema, args_json_schema=args_json_schema)
    fields = _clean_fields(
        {
            "tags": tags or [],
            "return_char_limit": return_char_limit,
            "pip_requirements": pip_requirements,
            "sandbox": sandbox,
            "env_vars": env_vars,
            "allow_network": allow_network,
            "default_requires_approval": default_requires_approval,
        }
    )
    _name_free(owner=owner, name=schema["name"])
    tool = _apply(
        Tool(owner=owner, tool_type="custom"),
        schema=schema,
        source_code=source_code,
        description=description,
        fields=fields,
    )
    tool.save()
    return tool


@transaction.atomic
def tool_upsert(
    *,
    owner: Organization,
    source_code: str,
    json_schema: dict | None = None,
    args_json_schema: dict | None = None,
    **fields: Any,
) -> Tool:
    """Create the tool, or update the owner's custom tool with the same function name (locks that row)."""
    schema = tool_schema_resolve(source_code=source_code, json_schema=json_schema, args_json_schema=args_json_schema)
    existing = Tool.objects.select_for_update().filter(owner=owner, name=schema["name"]).first()
    if existing is None:
        return tool_create(
            owner=owner, source_code=source_code, json_schema=json_schema, args_json_schema=args_json_schema, **fields
        )
    return tool_update(
        tool=existing,
        changes={
            "source_code": source_code,
            "json_schema": json_schema,
            "args_json_schema": args_json_schema,
            **fields,
        },
    )


@transaction.atomic
def tool_update(*, tool: Tool, changes: dict) -> Tool:
    """Apply `changes` (source_code, json_schema, description, tags, ...) to a custom tool; re-derives the schema."""
    if tool.tool_type != "custom":
        raise ToolLocked(f"'{tool.name}' is a built-in tool and cannot be modified")
    unknown = set(changes) - set(_EDITABLE)
    if unknown:
        raise Invalid(f"cannot change: {', '.join(sorted(unknown))}")
    policy.network_check(tool.owner, changes.get("allow_network"))
    schema = source = None
    if changes.get("source_code") is not None or changes.get("json_schema") or changes.get("args_json_schema"):
        source = changes["source_code"] if changes.get("source_code") is not None else tool.source_code
        schema = tool_schema_resolve(
            source_code=source,
            json_schema=changes.get("json_schema"),
            args_json_schema=changes.get("args_json_schema"),
            name=None if changes.get("source_code") is not None else tool.name,
            source_defines=changes.get("source_code") is not None,
        )
        if schema["name"] != tool.name:
            _name_free(owner=tool.owner, name=schema["name"], exclude_pk=tool.pk)
    _apply(
        tool, schema=schema, source_code=source, description=changes.get("description"), fields=_clean_fields(changes)
    )
    tool.save()
    tool_code_changed.send(sender=Tool, tool=tool)
    return tool


@transaction.atomic
def tool_delete(*, tool: Tool, builtin_ok: bool = False) -> None:
    """Delete a custom tool (detaches it from every agent, each getting a new version; its run history keeps the name).
    With `builtin_ok` (the API: Letta's DELETE /v1/tools/{id} deletes any tool) a built-in goes the same way and is
    installed afresh, under a new id, by the next first page of the tool list or add-base-tools; MCP tools belong to
    their server."""
    if tool.tool_type == "external_mcp" or (tool.tool_type != "custom" and not builtin_ok):
        raise ToolLocked(f"'{tool.name}' is a built-in tool and cannot be deleted")
    affected = list(Agent.objects.filter(tools=tool))
    tool.delete()
    agent_tools_changed.send(sender=Tool, agents=affected, message=f"tool {tool.name} deleted")
