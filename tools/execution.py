"""Running a tool: the one place that picks the sandbox, builds the tool's environment and records the run.

Backend choice is explicit and shown: a per-run override, else the tool's own setting, else the owner's
default (IDE settings), else the deployment's `SANDBOX_DEFAULT`. An E2B key being configured never
switches backends by itself; it is only the credential used once `e2b` has been chosen. Network is chosen
the same way (per-run override, else the tool's `allow_network`, else `SANDBOX_ALLOW_NETWORK`, off by
default) and every run records whether it had it.
"""

from __future__ import annotations

import ast
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from core.accounts import api_token_create
from core.engine.base_tools import CODE_TOOL_NAMES
from core.errors import Invalid
from core.models import Agent, Membership, Organization, OwnerSettings
from core.selectors import agent_tags
from memory.selectors import agent_blocks
from tools import json_schema as tool_schema
from tools import policy
from tools.models import Tool, ToolRun
from tools.sandbox.base import SandboxError, SandboxRequest, SandboxResult
from tools.sandbox.local import LocalSandbox, refusal_message
from tools.sandbox.selection import get_backend, resolve_backend_name
from tools.services import env_vars_clean, pip_requirement_strings, pip_requirements_clean, tool_schema_resolve

# How long a tool's API token outlives the run's own timeout (it is revoked as soon as the run ends).
TOKEN_GRACE_S = 60


def sandbox_config_for(*, owner: Organization) -> dict[str, Any]:
    """The owner's sandbox settings: default backend, timeout and each backend's constructor config."""

    prefs = OwnerSettings.objects.filter(owner=owner).first()
    return {
        "default": ((prefs.sandbox_default if prefs else "") or settings.SANDBOX_DEFAULT or "local").strip().lower(),
        "timeout_s": float(settings.SANDBOX_TIMEOUT_S),
        "allow_network": bool(
            settings.SANDBOX_ALLOW_NETWORK
            if prefs is None or prefs.sandbox_allow_network is None
            else prefs.sandbox_allow_network
        ),
        # Whether the operator lets this account's runs have network at all (TOOL_NETWORK; tools/policy.py).
        "network_permitted": policy.network_permitted(owner),
        "local": {
            "allow_pip_install": bool(settings.SANDBOX_LOCAL_ALLOW_PIP),
            "venv_cache_dir": str(settings.SANDBOX_CACHE_DIR),
            "allow_weak_isolation": bool(settings.SANDBOX_LOCAL_WEAK_ISOLATION),
            "warm": max(0, int(settings.SANDBOX_WARM_POOL)),
        },
        "e2b": {
            "api_key": (prefs.e2b_api_key if prefs else "") or settings.E2B_API_KEY or None,
            "template": (prefs.e2b_template if prefs else "") or settings.E2B_TEMPLATE or None,
        },
    }


def local_sandbox_notice() -> str:
    """What the IDE says about the local sandbox on this machine: "" when runs get namespaces, else why not.

    The first call per process starts one trial sandbox (cached).
    """

    try:
        mode, reason = LocalSandbox(allow_weak_isolation=bool(settings.SANDBOX_LOCAL_WEAK_ISOLATION)).isolation_status()
    except (SandboxError, OSError) as exc:
        return f"The local tool sandbox is unusable here: {exc}"
    if mode == "refused":
        message = refusal_message(reason)
        return message[0].upper() + message[1:] + "."
    if mode == "weak" and reason:
        return (
            f"Local tools run without isolation: {reason}; SANDBOX_LOCAL_WEAK_ISOLATION is set, so they can "
            "read what the server's user can and reach the network."
        )
    return ""


def tool_backend_name(
    *, owner: Organization, tool: Tool | None = None, override: str | None = None, config: dict | None = None
) -> str:
    """Which backend runs this tool: `override`, else the tool's setting, else the owner/deployment default."""
    config = config or sandbox_config_for(owner=owner)
    explicit = (override or "").strip() or (tool.sandbox if tool else "") or None
    try:
        return resolve_backend_name(explicit, config["default"])
    except SandboxError as exc:
        raise Invalid(str(exc), detail={"sandbox": str(exc)}) from exc


def tool_network_allowed(*, tool: Tool | None = None, override: bool | None = None, config: dict) -> bool:
    """Whether a run gets the network: `override`, else the tool's `allow_network`, else the owner's default
    (Settings), else the deployment's — and never when the operator does not permit it for the account."""
    if not config.get("network_permitted", True):
        return False
    if override is not None:
        return bool(override)
    if tool is not None and tool.allow_network is not None:
        return tool.allow_network
    return config["allow_network"]


def declares_agent_state(source_code: str, function_name: str) -> bool:
    """Whether the tool function takes an `agent_state` parameter (parsed, not executed)."""
    try:
        module = ast.parse(source_code)
    except SyntaxError:
        return False
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function_name:
            a = node.args
            return any(p.arg == "agent_state" for p in a.posonlyargs + a.args + a.kwonlyargs)
    return False


def agent_state_for(*, agent: Agent, with_tools: bool = False) -> dict[str, Any]:
    """The snapshot a tool's `agent_state` receives: id, name, tags and blocks (the runner indexes by label); with
    `with_tools` (the code tools) also `tools`, the agent's custom tools' name and source, which Letta's run_code
    prepends to the code it runs."""

    blocks = [
        {"id": b.id, "label": b.label, "value": b.value, "limit": b.limit, "description": b.description}
        for b in agent_blocks(agent=agent)
    ]
    state = {"id": agent.id, "name": agent.name, "tags": agent_tags(agent), "blocks": blocks}
    if with_tools:
        custom = agent.tools.filter(tool_type="custom").exclude(source_code="").order_by("name")
        state["tools"] = [{"name": t.name, "tool_type": "custom", "source_code": t.source_code} for t in custom]
    return state


def _token_user(owner: Organization):
    m = Membership.objects.filter(organization=owner).select_related("user").order_by("created_at").first()
    return m.user if m else None


def tool_env_build(
    *, tool: Tool | None, agent: Agent | None, env_vars: dict | None, origin: str, timeout_s: float, step_id: str = ""
) -> tuple[dict[str, str], Any]:
    """Layer the tool's env: workbench defaults → agent secrets → per-run vars → AIDE_* (creates a token)."""
    env: dict[str, str] = {}
    if tool is not None and origin == "workbench":
        env.update(env_vars_clean(tool.env_vars))
    if agent is not None:
        env.update({str(k): str(v) for k, v in (agent.secrets or {}).items()})
    env.update(env_vars_clean(env_vars))
    token = None
    if agent is not None:
        env["AIDE_AGENT_ID"] = agent.id
        env["AIDE_BASE_URL"] = settings.PUBLIC_BASE_URL.rstrip("/")
        user = _token_user(agent.owner)
        if user is not None:
            token, raw = api_token_create(
                user=user,
                org=agent.owner,
                # a call made in a step is named by the step: what the tool changes through the API is the step's doing
                name=step_id or f"tool run for {agent.id}",
                agent_id=agent.id,
                ttl=timedelta(seconds=timeout_s + TOKEN_GRACE_S),
            )
            env["AIDE_API_TOKEN"] = raw
    return env, token


def _revoke(token) -> None:
    if token is not None:
        type(token).objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def _arg_models(schema: dict) -> dict | None:
    """The parameters schema when it defines models (a pydantic args_json_schema's $defs), else None."""
    params = schema.get("parameters")
    return params if isinstance(params, dict) and isinstance(params.get("$defs"), dict) and params["$defs"] else None


def _backend(name: str, config: dict):
    return get_backend(name, **config.get(name, {}))


def tool_execute(
    *,
    owner: Organization,
    source_code: str,
    args: dict,
    env_vars: dict | None = None,
    tool: Tool | None = None,
    agent: Agent | None = None,
    origin: str = "workbench",
    step_id: str = "",
    name: str | None = None,
    json_schema: dict | None = None,
    sandbox: str | None = None,
    pip_requirements: list | None = None,
    agent_state: dict | None = None,
    allow_network: bool | None = None,
    record: bool = True,
) -> ToolRun:
    """Validate args, run the tool in its sandbox (subprocess or E2B; seconds) and record a ToolRun.

    Raises Invalid (422) for a bad schema, bad arguments (`detail` maps each argument to its problem),
    bad env vars or an unknown backend; a failing tool is a run with status "error". The AIDE_API_TOKEN
    given to the tool is revoked when the run ends; without network the tool cannot call the API with it. `record=False` returns the ToolRun unsaved (for a
    caller that saves it inside its own transaction). The sandbox's full result is on `run.result`.
    """
    if json_schema is None and tool is not None and source_code == tool.source_code:
        json_schema = tool.json_schema or None
    schema = tool_schema_resolve(source_code=source_code, json_schema=json_schema, name=name)
    try:
        args = tool_schema.validate_args(schema, args if args is not None else {})
    except tool_schema.ArgumentError as exc:
        raise Invalid(str(exc), detail=exc.errors) from exc
    if tool is None:
        tool = Tool.objects.filter(owner=owner, name=schema["name"], tool_type="custom").first()
    config = sandbox_config_for(owner=owner)
    if allow_network and not config["network_permitted"]:
        policy.network_check(owner, True)
    backend_name = tool_backend_name(owner=owner, tool=tool, override=sandbox, config=config)
    pip = pip_requirements_clean(
        pip_requirements if pip_requirements is not None else (tool.pip_requirements if tool is not None else [])
    )
    if agent_state is None and agent is not None and declares_agent_state(source_code, schema["name"]):
        code_tool = tool is not None and tool.tool_type == "base" and tool.name in CODE_TOOL_NAMES
        agent_state = agent_state_for(agent=agent, with_tools=code_tool)
    env, token = tool_env_build(
        tool=tool, agent=agent, env_vars=env_vars, origin=origin, timeout_s=config["timeout_s"], step_id=step_id
    )
    try:
        result = _backend(backend_name, config).run(
            SandboxRequest(
                source_code=source_code,
                function_name=schema["name"],
                args=args,
                env_vars=env,
                agent_state=agent_state,
                timeout_s=config["timeout_s"],
                pip_requirements=pip_requirement_strings(pip),
                allow_network=tool_network_allowed(tool=tool, override=allow_network, config=config),
                arg_models=_arg_models(schema),
            )
        )
    finally:
        _revoke(token)
    return _tool_run(
        owner=owner,
        tool=tool,
        name=schema["name"],
        agent=agent,
        step_id=step_id,
        origin=origin,
        args=args,
        result=result,
        backend_name=backend_name,
        record=record,
    )


def _tool_run(
    *, owner, tool, name, agent, step_id, origin, args, result: SandboxResult, backend_name: str, record: bool
) -> ToolRun:
    run = ToolRun(
        owner=owner,
        tool=tool,
        tool_name=name,
        agent_id=agent.id if agent else "",
        step_id=step_id,
        origin=origin,
        args=args,
        status=result.status,
        tool_return=result.tool_return,
        stdout=result.stdout,
        stderr=result.stderr,
        sandbox=result.backend or backend_name,
        network=result.network,
        duration_ms=result.duration_ms,
    )
    if record:
        run.save()
    run.result = result  # transient: error type/message, traceback and the agent_state the tool left
    return run
