"""What the tools page calls to save and run a tool. Delegates to `tools.workbench` (the tools app's service)
when it exists; until then a minimal real implementation: the sandbox backends, and ToolRun records."""

from django.conf import settings
from django.db import transaction

from core.errors import Conflict, Invalid
from core.models import Organization
from tools import schema as tool_schema
from tools.models import Tool, ToolRun


def _workbench():
    try:
        from tools import workbench  # type: ignore[attr-defined]
    except ImportError:
        return None
    return workbench


def _owner_sandbox_default(owner: Organization) -> str:
    from core.models import OwnerSettings

    row = OwnerSettings.objects.filter(owner=owner).first()
    return (row.sandbox_default if row else "") or settings.SANDBOX_DEFAULT


def run(*, owner: Organization, source_code: str, args: dict, env_vars: dict, tool_id: str | None = None,
        agent_id: str | None = None) -> dict:
    """Run source with args in the sandbox that applies; records a ToolRun. Returns the result dict."""
    wb = _workbench()
    if wb is not None and hasattr(wb, "tool_run_source"):
        return wb.tool_run_source(owner=owner, source_code=source_code, args=args, env_vars=env_vars,
                                  tool_id=tool_id, agent_id=agent_id)
    from tools.sandbox import SandboxRequest, get_backend, resolve_backend_name

    schema = tool_schema.derive_schema(source_code)
    try:
        args = tool_schema.validate_args(schema, args)
    except tool_schema.ArgumentError as exc:
        raise Invalid(str(exc)) from exc
    tool = Tool.objects.filter(owner=owner, id=tool_id).first() if tool_id else None
    backend_name = resolve_backend_name(tool.sandbox if tool else None, _owner_sandbox_default(owner))
    backend = get_backend(backend_name)
    result = backend.run(SandboxRequest(source_code=source_code, function_name=schema["name"], args=args,
                                        env_vars={str(k): str(v) for k, v in env_vars.items()},
                                        timeout_s=settings.SANDBOX_TIMEOUT_S))
    out = result.to_dict()
    out["sandbox"] = result.backend or backend_name
    ToolRun.objects.create(owner=owner, tool=tool, tool_name=schema["name"], agent_id=agent_id or "", args=args,
                           status=result.status, tool_return=result.tool_return, stdout=result.stdout,
                           stderr=result.stderr, sandbox=out["sandbox"], duration_ms=result.duration_ms)
    return out


@transaction.atomic
def save(*, owner: Organization, source_code: str, tool_id: str | None, env_vars: dict, sandbox: str = "") -> Tool:
    """Create or update a custom tool from source (schema derived); names are unique per owner."""
    wb = _workbench()
    if wb is not None and hasattr(wb, "tool_save_source"):
        return wb.tool_save_source(owner=owner, source_code=source_code, tool_id=tool_id, env_vars=env_vars, sandbox=sandbox)
    if not isinstance(env_vars, dict):
        raise Invalid("env vars must be a JSON object")
    if sandbox not in dict(Tool.SANDBOXES):
        raise Invalid("sandbox must be '', 'local' or 'e2b'")
    schema = tool_schema.derive_schema(source_code)
    tool = Tool.objects.filter(owner=owner, id=tool_id).first() if tool_id else Tool(owner=owner, tool_type="custom")
    if tool.tool_type != "custom":
        raise Invalid("built-in tools cannot be edited")
    clash = Tool.objects.filter(owner=owner, name=schema["name"]).exclude(pk=tool.pk).exists()
    if clash:
        raise Conflict(f"A tool named '{schema['name']}' already exists")
    tool.name, tool.source_code, tool.json_schema = schema["name"], source_code, schema
    tool.description, tool.env_vars, tool.sandbox = schema.get("description", ""), env_vars, sandbox
    tool.save()
    return tool
