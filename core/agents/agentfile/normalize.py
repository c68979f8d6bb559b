"""Pieces shared by the v1 and v2 readers: blocks, tools, tool rules, model settings, messages.

Message mapping (Letta → ours): `function` → tool; `summary` → user (kind "summary"); an `approval`
request (it carries tool_calls) → assistant; an `approval` response is dropped (the tool message after it
holds the results); a tool message holding several `tool_returns` and no text becomes one tool message
per return. Text parts become our content, reasoning parts our `reasoning`; images are dropped (warned).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from core.agents.agentfile import checks as c
from core.agents.agentfile.mcp_servers import mcp_tool_server
from core.agents.agentfile.model import (
    MAX_CONTEXT_WINDOW,
    MAX_NAME,
    MAX_SECRETS,
    MAX_SOURCE,
    MAX_STRING,
    MAX_TAGS,
    MAX_TOOL_RULES,
    AgentFileError,
    ParsedBlock,
    ParsedMessage,
    ParsedTool,
)
from core.engine.base_tools import is_installed_builtin
from core.engine.types import RULE_TYPES, tool_rule_from_dict, tool_rule_to_dict
from memory.services import DEFAULT_BLOCK_LIMIT
from tools.json_schema import SchemaError, validate_tool_name

ROLES = ("system", "user", "assistant", "tool", "function", "approval", "summary")
PART_TYPES = (
    "text",
    "image",
    "tool_call",
    "tool_return",
    "reasoning",
    "redacted_reasoning",
    "omitted_reasoning",
    "summarized_reasoning",
)
_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_PROVIDER_ALIASES = {"google_ai": "gemini", "google_vertex": "vertex_ai"}


def block(raw: Any, path: str, key: str, warn: list[str]) -> ParsedBlock:
    d = c.obj(raw, path, c.BLOCK)
    label = c.string(d.get("label"), c.join(path, "label"), optional=False)
    if not _LABEL.match(label):
        raise AgentFileError(
            c.join(path, "label"), f"{label!r} is not a block label (1-100 letters, digits, '_' or '-')"
        )
    value = c.string(d.get("value"), c.join(path, "value"))
    limit = c.integer(d.get("limit"), c.join(path, "limit"), low=1, high=MAX_STRING) or max(
        DEFAULT_BLOCK_LIMIT, len(value)
    )
    if len(value) > limit:
        warn.append(
            f"Block '{label}' holds {len(value)} characters, over its limit of {limit}; the limit was raised to fit."
        )
        limit = len(value)
    meta = d.get("metadata") if d.get("metadata") is not None else d.get("metadata_")
    return ParsedBlock(
        key=key,
        label=label,
        value=value,
        limit=limit,
        description=c.string(d.get("description"), c.join(path, "description"), limit=10_000),
        read_only=c.boolean(d.get("read_only"), c.join(path, "read_only")),
        metadata=dict(c.obj(meta, c.join(path, "metadata"))) if meta is not None else {},
    )


def tool(raw: Any, path: str, key: str, warn: list[str]) -> ParsedTool | None:
    """A tool of the file, or None for a Letta built-in we have no equivalent of (warned)."""

    d = c.obj(raw, path, c.TOOL)
    name = c.string(d.get("name"), c.join(path, "name"), optional=False, limit=200)
    try:
        validate_tool_name(name)
    except SchemaError as exc:
        # A name no provider accepts cannot be called; the rest of the file is still worth importing.
        warn.append(f"Tool {name[:80]!r} was not imported: {exc}.")
        return None
    letta_type = c.string(d.get("tool_type"), c.join(path, "tool_type"), limit=64, default="custom")
    source = c.string(d.get("source_code"), c.join(path, "source_code"), limit=MAX_SOURCE)
    if is_installed_builtin(name):
        if letta_type == "custom" and source:
            warn.append(f"Tool '{name}' has the name of a built-in tool; the built-in is used, not the file's code.")
        return ParsedTool(key=key, name=name, builtin=True, letta_type=letta_type)
    if letta_type == "external_mcp":
        schema = c.obj(d.get("json_schema") or {}, c.join(path, "json_schema"))
        return ParsedTool(
            key=key,
            name=name,
            builtin=False,
            letta_type=letta_type,
            json_schema=dict(schema),
            description=c.string(d.get("description"), c.join(path, "description"), limit=100_000),
            mcp_server=mcp_tool_server(d),
        )
    if letta_type != "custom":
        warn.append(f"Letta built-in tool '{name}' ({letta_type}) has no equivalent here; it was not attached.")
        return None
    schema = c.obj(d.get("json_schema") or {}, c.join(path, "json_schema"))
    if schema:
        if schema.get("name") not in (None, name):
            warn.append(
                f"Tool '{name}': its json_schema named {str(schema.get('name'))[:80]!r}; the tool's name was used."
            )
            schema = {**schema, "name": name}
        c.obj(schema.get("parameters") or {}, c.join(path, "json_schema.parameters"))
    if source:
        try:
            ast.parse(source)
        except (SyntaxError, ValueError):
            # Letta writes such stubs itself (client-side tools); the schema still describes the tool.
            warn.append(f"Tool '{name}': its source code is not valid Python; calls to it will fail until it is fixed.")
    else:
        warn.append(f"Tool '{name}' has no source code; calls to it will fail until you add its code.")
    return ParsedTool(
        key=key,
        name=name,
        builtin=False,
        letta_type=letta_type,
        source_code=source,
        json_schema=dict(schema),
        description=c.string(d.get("description"), c.join(path, "description"), limit=100_000)
        or str(schema.get("description") or ""),
        tags=tuple(
            c.string(t, c.join(c.join(path, "tags"), i), limit=100)
            for i, t in enumerate(c.lst(d.get("tags"), c.join(path, "tags"), limit=MAX_TAGS))
        ),
        return_char_limit=c.integer(
            d.get("return_char_limit"), c.join(path, "return_char_limit"), low=1, high=10_000_000
        )
        or 50000,
        pip_requirements=tuple(
            _pip(r, c.join(c.join(path, "pip_requirements"), i))
            for i, r in enumerate(c.lst(d.get("pip_requirements"), c.join(path, "pip_requirements"), limit=100))
        ),
        default_requires_approval=None
        if d.get("default_requires_approval") is None
        else c.boolean(d["default_requires_approval"], c.join(path, "default_requires_approval")),
    )


def _pip(raw: Any, path: str) -> dict[str, Any]:
    d = c.obj(raw, path)
    out = {"name": c.string(d.get("name"), c.join(path, "name"), optional=False, limit=200)}
    if d.get("version") is not None:
        out["version"] = c.string(d.get("version"), c.join(path, "version"), limit=100)
    return out


def tool_rules(raw: Any, path: str, warn: list[str]) -> tuple[dict[str, Any], ...]:
    """Validated rules in Letta's shape (requires_approval included); types our engine does not know are dropped."""

    out: list[dict[str, Any]] = []
    dropped: dict[str, list[str]] = {}
    for i, r in enumerate(c.lst(raw, path, limit=MAX_TOOL_RULES)):
        p = c.join(path, i)
        d = c.obj(r, p, c.TOOL_RULE)
        kind = c.string(d.get("type"), c.join(p, "type"), optional=False, limit=64)
        name = c.string(d.get("tool_name"), c.join(p, "tool_name"), limit=200)
        if not name.strip():
            warn.append(f"Tool rule {p} ({kind[:64]}) names no tool and was dropped.")
            continue
        if kind not in RULE_TYPES:
            dropped.setdefault(kind, []).append(name)
            continue
        try:
            rule = tool_rule_to_dict(tool_rule_from_dict(dict(d)))
        except (ValueError, TypeError, KeyError) as exc:
            warn.append(f"Tool rule {p} ({kind} on '{name[:80]}') was dropped: {exc}")
            continue
        if rule in out:
            warn.append(f"Tool rule {p} repeats an earlier rule ({kind} on '{name[:80]}') and was dropped.")
            continue
        out.append(rule)
    for kind, names in dropped.items():
        warn.append(f"Tool rules of type '{kind}' are not supported here and were dropped (tools: {', '.join(names)}).")
    return tuple(out)


def model(llm_config: Any, agent_model: Any, path: str) -> tuple[str, dict[str, Any], int | None]:
    """(model handle, model_settings, context window) from Letta's llm_config and optional `model` handle."""
    cfg = c.obj(llm_config, c.join(path, "llm_config")) if llm_config is not None else {}
    p = c.join(path, "llm_config")
    handle = c.string(agent_model, c.join(path, "model"), limit=MAX_NAME)
    if not handle and cfg:
        name = c.string(cfg.get("model"), c.join(p, "model"), optional=False, limit=MAX_NAME)
        provider = c.string(cfg.get("model_endpoint_type"), c.join(p, "model_endpoint_type"), limit=64) or "openai"
        given = c.string(cfg.get("handle"), c.join(p, "handle"), limit=MAX_NAME)
        # A Letta handle may name a saved config ("openai/gpt-4-june" for gpt-4.1); trust it only if it names the model.
        handle = given if given.partition("/")[2] == name else f"{_PROVIDER_ALIASES.get(provider, provider)}/{name}"
    ms: dict[str, Any] = {}
    for key, value in (
        ("temperature", c.number(cfg.get("temperature"), c.join(p, "temperature"), low=0, high=2)),
        ("max_tokens", c.integer(cfg.get("max_tokens"), c.join(p, "max_tokens"), low=1, high=10_000_000)),
        ("put_inner_thoughts", cfg.get("put_inner_thoughts_in_kwargs")),
        ("enable_reasoner", cfg.get("enable_reasoner")),
        (
            "max_reasoning_tokens",
            c.integer(cfg.get("max_reasoning_tokens"), c.join(p, "max_reasoning_tokens"), low=0, high=10_000_000),
        ),
        ("reasoning_effort", c.string(cfg.get("reasoning_effort"), c.join(p, "reasoning_effort"), limit=32) or None),
        ("frequency_penalty", c.number(cfg.get("frequency_penalty"), c.join(p, "frequency_penalty"), low=-2, high=2)),
        ("parallel_tool_calls", cfg.get("parallel_tool_calls")),
    ):
        if value is not None:
            if key in ("put_inner_thoughts", "enable_reasoner", "parallel_tool_calls"):
                value = c.boolean(
                    value, c.join(p, {"put_inner_thoughts": "put_inner_thoughts_in_kwargs"}.get(key, key))
                )
            ms[key] = value
    for key, default in (("enable_reasoner", False), ("max_reasoning_tokens", 0)):  # Letta's defaults say nothing
        if ms.get(key) == default:
            del ms[key]
    if ms.get("enable_reasoner") and ms.get("put_inner_thoughts") is False:  # said so, as Letta writes a reasoner
        ms["native_reasoning"] = True
    window = c.integer(cfg.get("context_window"), c.join(p, "context_window"), low=1024, high=MAX_CONTEXT_WINDOW)
    return handle, ms, window


def embedding(raw: Any, path: str) -> tuple[str, dict[str, Any]]:
    if raw is None:
        return "", {}
    d = c.obj(raw, path)
    name = c.string(d.get("embedding_model"), c.join(path, "embedding_model"), limit=MAX_NAME)
    provider = c.string(d.get("embedding_endpoint_type"), c.join(path, "embedding_endpoint_type"), limit=64) or "openai"
    given = c.string(d.get("handle"), c.join(path, "handle"), limit=MAX_NAME)
    handle = given or (f"{provider}/{name}" if name else "")
    cfg = {}
    for key in ("embedding_dim", "embedding_chunk_size"):
        value = c.integer(d.get(key), c.join(path, key), low=0, high=1_000_000)
        if value is not None:
            cfg[key] = value
    return handle, cfg


def tags(raw: Any, path: str) -> tuple[str, ...]:
    out = []
    for i, t in enumerate(c.lst(raw, path, limit=MAX_TAGS)):
        if isinstance(t, dict):  # v1 wrote tags as {"tag": ...}
            t = t.get("tag")
        tag = c.string(t, c.join(path, i), optional=False, limit=100).strip()
        if not tag:
            raise AgentFileError(c.join(path, i), "a tag must not be empty")
        out.append(tag)
    return tuple(dict.fromkeys(out))


def secrets(raw: Any, path: str) -> dict[str, str]:
    """Secret names from a dict (v2) or a list of {key, value} (v1); values are kept as given (usually blank)."""
    if raw is None:
        return {}
    if isinstance(raw, list):
        items = []
        for i, e in enumerate(c.lst(raw, path, limit=MAX_SECRETS)):
            d = c.obj(e, c.join(path, i))
            items.append((d.get("key"), d.get("value"), c.join(c.join(path, i), "key")))
    else:
        d = c.obj(raw, path)
        if len(d) > MAX_SECRETS:
            raise AgentFileError(path, f"has {len(d)} entries; the limit is {MAX_SECRETS}")
        items = [(k, v, c.join(path, k)) for k, v in d.items()]
    out = {}
    for key, value, p in items:
        key = c.string(key, p, optional=False, limit=200)
        if not key.isidentifier():
            raise AgentFileError(p, f"{key!r} is not a valid environment variable name")
        out[key] = c.string(value, p, limit=100_000)
    return out


def messages(
    raw: list, path: str, keys: list[str], warn: list[str]
) -> tuple[list[ParsedMessage], dict[str, list[str]]]:
    """Our messages in file order, and for each file key the keys it became (none when dropped)."""
    out: list[ParsedMessage] = []
    became: dict[str, list[str]] = {}
    call_names: dict[str, str] = {}
    dropped_images = 0
    for i, (m, key) in enumerate(zip(raw, keys, strict=True)):
        p = c.join(path, i)
        d = c.obj(m, p, c.MESSAGE)
        role = c.string(d.get("role"), c.join(p, "role"), optional=False, limit=32)
        if role not in ROLES:
            raise AgentFileError(c.join(p, "role"), f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        text, reasoning, native, images, signed = _content(d.get("content"), c.join(p, "content"))
        dropped_images += images
        calls = _tool_calls(d.get("tool_calls"), c.join(p, "tool_calls"))
        call_names.update({tc["id"]: tc["name"] for tc in calls})
        returns = _tool_returns(d.get("tool_returns"), c.join(p, "tool_returns"))
        call_id = c.string(d.get("tool_call_id"), c.join(p, "tool_call_id"), limit=200)
        name = c.string(d.get("name"), c.join(p, "name"), limit=200)
        base = {
            "reasoning": reasoning,
            "reasoning_source": "native" if reasoning and native else ("thinking_arg" if reasoning else ""),
            "otid": c.string(d.get("otid"), c.join(p, "otid"), limit=100),
        }
        created = c.string(d.get("created_at"), c.join(p, "created_at"), limit=64)
        if role == "approval" and not calls:
            became[key] = []
            continue
        if role in ("tool", "function") and returns and not text:
            made = [
                ParsedMessage(
                    key=key if j == 0 else f"{key}#{j}",
                    role="tool",
                    text=r["func_response"],
                    tool_call_id=r["tool_call_id"],
                    name=call_names.get(r["tool_call_id"], name),
                    tool_return=r["tool_return"],
                    created_at=created,
                )
                for j, r in enumerate(returns)
            ]
        elif role in ("tool", "function"):
            tr = returns[0]["tool_return"] if returns else {}
            made = [
                ParsedMessage(
                    key=key,
                    role="tool",
                    text=text,
                    tool_call_id=call_id,
                    name=name or call_names.get(call_id, ""),
                    tool_return=tr,
                    created_at=created,
                    **base,
                )
            ]
        elif role in ("assistant", "approval"):
            made = [
                ParsedMessage(
                    key=key,
                    role="assistant",
                    text=text,
                    tool_calls=tuple(calls),
                    name=name,
                    created_at=created,
                    thinking_blocks=tuple(signed),
                    **base,
                )
            ]
        else:
            made = [
                ParsedMessage(
                    key=key,
                    role="user" if role == "summary" else role,
                    text=text,
                    name=name,
                    kind="summary" if role == "summary" else "",
                    created_at=created,
                    **base,
                )
            ]
        out.extend(made)
        became[key] = [m.key for m in made]
    if dropped_images:
        warn.append(f"{dropped_images} image part(s) in messages were dropped (images are not supported in history).")
    return out, became


def _content(raw: Any, path: str) -> tuple[str, str, bool, int, list[dict[str, Any]]]:
    """Text, reasoning, whether it is native, images dropped, and the provider's signed thinking blocks (kept so
    a conversation with extended thinking continues on the same provider)."""
    if raw is None:
        return "", "", False, 0, []
    if isinstance(raw, str):
        return raw, "", False, 0, []
    texts, reasonings, native, images, signed = [], [], False, 0, []
    for i, part in enumerate(c.lst(raw, path, limit=1000)):
        pp = c.join(path, i)
        d = c.obj(part, pp)
        kind = c.string(d.get("type"), c.join(pp, "type"), optional=False, limit=64)
        if kind not in PART_TYPES:
            raise AgentFileError(c.join(pp, "type"), f"unknown content type {kind!r}")
        if kind == "text":
            texts.append(c.string(d.get("text"), c.join(pp, "text")))
        elif kind == "reasoning":
            reasonings.append(c.string(d.get("reasoning"), c.join(pp, "reasoning")))
            native = native or bool(d.get("is_native"))
            signature = c.string(d.get("signature"), c.join(pp, "signature"), limit=100_000)
            if signature:
                signed.append({"type": "thinking", "thinking": reasonings[-1], "signature": signature})
        elif kind == "image":
            images += 1
    return "\n".join(t for t in texts if t), "\n".join(r for r in reasonings if r), native, images, signed


def _tool_calls(raw: Any, path: str) -> list[dict[str, str]]:
    out = []
    for i, tc in enumerate(c.lst(raw, path, limit=1000)):
        p = c.join(path, i)
        d = c.obj(tc, p)
        fn = c.obj(d.get("function"), c.join(p, "function"))
        args = fn.get("arguments")
        if isinstance(args, dict):
            args = json.dumps(args)
        out.append(
            {
                "id": c.string(d.get("id"), c.join(p, "id"), optional=False, limit=200),
                "name": c.string(fn.get("name"), c.join(p, "function.name"), optional=False, limit=200),
                "arguments": c.string(args, c.join(p, "function.arguments"), default="{}"),
            }
        )
    return out


def _tool_returns(raw: Any, path: str) -> list[dict[str, Any]]:
    out = []
    for i, tr in enumerate(c.lst(raw, path, limit=1000)):
        p = c.join(path, i)
        d = c.obj(tr, p)
        response = d.get("func_response")
        if response is not None and not isinstance(response, str):
            response = json.dumps(response)
        status = c.string(d.get("status"), c.join(p, "status"), limit=32) or "success"
        ret: dict[str, Any] = {"status": status}
        for key in ("stdout", "stderr"):  # Letta keeps a list of chunks; a stored return holds the text, as ours
            if isinstance(d.get(key), str) and d[key]:
                ret[key] = d[key]
            elif d.get(key):
                parts = [
                    c.string(s, c.join(c.join(p, key), j))
                    for j, s in enumerate(c.lst(d[key], c.join(p, key), limit=1000))
                ]
                ret[key] = "".join(s if s.endswith("\n") else s + "\n" for s in parts if s)
        out.append(
            {
                "tool_call_id": c.string(d.get("tool_call_id"), c.join(p, "tool_call_id"), limit=200),
                "func_response": c.string(response, c.join(p, "func_response")),
                "tool_return": ret,
            }
        )
    return out
