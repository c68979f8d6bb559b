"""The tools page: library, editor with a live schema preview, the typed arguments form (tools.arg_form), Run with
its output followed live, history."""

import dataclasses
import json
import re
import time

from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect, push_url

from core.agents.versions import noted
from core.errors import DomainError
from core.models import Message
from core.selectors import agent_get, agents_list
from core.sse import event_stream
from core.text import json_input
from core.web.common import org
from tools import arg_form, selectors, services, web_workbench
from tools import json_schema as tool_schema
from tools.execution import local_sandbox_notice
from tools.workbench import tool_save_source

NEW_TOOL_SOURCE = '''def roll_dice(sides: int = 6, times: int = 1) -> str:
    """Roll a die and report the results.

    Args:
        sides: Number of faces on the die.
        times: How many times to roll it.

    Returns:
        The rolls, comma-separated.
    """
    import random

    rolls = [random.randint(1, sides) for _ in range(times)]
    print(f"rolled {rolls}")
    return ", ".join(map(str, rolls))
'''


def _recorded_call(request, message_id: str, call_id: str) -> dict | None:
    """A tool call from a conversation, to open in the workbench with its arguments."""

    row = Message.objects.filter(owner=org(request), id=message_id).first()
    for call in (row.tool_calls if row else []) or []:
        if call.get("id") == call_id or not call_id:
            try:
                args = json.loads(call.get("arguments") or "{}")
            except ValueError:
                args = {}
            args = {
                k: v
                for k, v in (args if isinstance(args, dict) else {}).items()
                if k not in ("thinking", "request_heartbeat")
            }
            return {"name": call.get("name"), "args": args, "agent_id": row.agent_id, "message_id": row.id}
    return None


@login_required
def tools_page(request):
    owner = org(request)
    library = list(selectors.tools_list(owner=owner))
    if not any(t.tool_type != "custom" for t in library):  # the library shows the built-ins before any agent exists
        services.builtin_tools_ensure(owner=owner)
        library = list(selectors.tools_list(owner=owner))
    tool, recorded = None, None
    if request.GET.get("message"):
        recorded = _recorded_call(request, request.GET["message"], request.GET.get("call", ""))
        if recorded:
            tool = next((t for t in library if t.name == recorded["name"]), None)
    elif request.GET.get("tool"):
        tool = next((t for t in library if t.id == request.GET["tool"]), None)
        if tool is None:
            raise Http404("tool not found")
    source = tool.source_code if tool else ("" if recorded else NEW_TOOL_SOURCE)
    schema, error = _derive(source, tool)

    runs = selectors.tool_runs(owner=owner, tool_name=tool.name) if tool else []
    # Arguments: a recorded call's when opened from one, else the last run's (a workbench session resumes).
    prefill = recorded["args"] if recorded else (runs[0].args if runs and isinstance(runs[0].args, dict) else {})
    attached = list(tool.agents.order_by("name")) if tool else []
    return TemplateResponse(
        request,
        "tools/tools.html",
        {
            "nav": "tools",
            "library": library,
            "tool": tool,
            "source": source,
            "schema": schema,
            "schema_error": error,
            "schema_json": json.dumps(schema, indent=2) if schema else "",
            "fields": _workbench_fields(schema, prefill),
            "form_key": "wb",
            "prefill_json": json.dumps(prefill),
            "prefilled_from_run": bool(prefill and not recorded),
            # an MCP or built-in tool: no source; it runs as saved (tool_run_saved)
            "saved_only": bool(tool and not tool.source_code),
            "recorded": recorded,
            "runs": runs,
            "env_keys": sorted((tool.env_vars or {}).keys()) if tool else [],
            "agents": list(agents_list(owner=owner, limit=200)),
            "attached_ids": {a.id for a in attached},
            "attached_names": ", ".join(a.name for a in attached),
            "pip_text": pip_text(tool.pip_requirements if tool else []),
            "run_agent_id": (recorded or {}).get("agent_id", "") or request.GET.get("agent", ""),
            "sandbox_notice": local_sandbox_notice(),
        },
    )


def pip_text(requirements: list) -> str:
    """`[{name, version?}]` as one requirement a line (`name==1.2` or `name>=2`)."""
    lines = []
    for r in requirements or []:
        version = r.get("version") or ""
        lines.append(r["name"] + (("==" + version) if version and version[0].isdigit() else version))
    return "\n".join(lines)


def pip_parse(text: str) -> list[dict]:
    """One requirement a line (`name`, `name==1.2`, `name>=2`) as `[{name, version?}]`; the service validates it."""

    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([^=<>!~ ]+)\s*(?:==)?\s*(.*)$", line)  # `==x` is Letta's bare version; others stay
        if m is None:
            out.append({"name": line})  # refused, with its text, by the service's validation
            continue
        name, version = m.group(1), m.group(2).strip()
        out.append({"name": name, "version": version} if version else {"name": name})
    return out


def _network_choice(value: str) -> bool | None:
    return {"true": True, "false": False}.get(value or "")


def _env_changes(post) -> dict:
    """The env vars typed into the page (a JSON object); the stored ones are never sent to the browser."""
    env = json_input(post.get("env_vars") or "{}")
    if not isinstance(env, dict):
        raise ValueError("env vars must be a JSON object of strings")
    return env


def _derive(source: str, tool=None) -> tuple[dict, str]:
    if tool is not None and not tool.source_code:
        return tool.json_schema, ""  # a built-in: its schema is fixed, it has no editable source
    if not source.strip():
        return {}, "Write a Python function with type hints and a Google-style docstring."
    try:
        return tool_schema.derive_schema(source), ""
    except tool_schema.SchemaError as exc:
        return {}, str(exc)


@login_required
@require_POST
def schema_preview(request):
    """Derive the schema of unsaved source (a read: nothing is stored)."""
    schema, error = _derive(request.POST.get("source_code", ""))
    try:
        prefill = json_input(request.POST.get("prefill") or "{}")
    except ValueError:
        prefill = {}
    return TemplateResponse(
        request,
        "tools/_schema.html",
        {
            "schema": schema,
            "schema_error": error,
            "schema_json": json.dumps(schema, indent=2) if schema else "",
            "fields": _workbench_fields(schema, prefill if isinstance(prefill, dict) else {}, request.POST),
            "form_key": "wb",
        },
    )


@dataclasses.dataclass(frozen=True)
class _DrawnField(arg_form.ArgField):
    drawn: str = ""  # what the server drew in it: the schema preview keeps a value that differs from this


def _workbench_fields(schema: dict, prefill: dict, post=None) -> list:
    """The workbench's argument fields, each saying what the server drew (tools/_args_form.html: drawn:arg_…).
    With `post`, the schema preview's: a value the person changed in the form it replaces (it differs from what that
    form drew) is kept, what the server drew (a default, the last run's value) is drawn again for the new schema. A
    select keeps a value only if it is still one of its options."""
    out = []
    for f in arg_form.form_fields(schema, prefill):
        drawn = ("on" if f.checked else "") if f.widget == "checkbox" else f.value
        f = _DrawnField(**{x.name: getattr(f, x.name) for x in dataclasses.fields(f)}, drawn=drawn)
        was, now = (post or {}).get("drawn:" + f.input_name), (post or {}).get(f.input_name, "")
        if was is not None and now.replace("\r\n", "\n") != was.replace("\r\n", "\n"):
            if f.widget == "checkbox":
                f = dataclasses.replace(f, checked=bool(now))
            elif not f.options or now in {value for value, _ in f.options}:
                f = dataclasses.replace(f, value=now)
        out.append(f)
    return out


def _arguments(request, schema: dict) -> tuple[dict, list, dict]:
    """The submitted form's arguments, its fields with their errors, and the errors (no run while there are any)."""
    fields = arg_form.form_fields(schema)
    args, errors = arg_form.form_arguments(request.POST, fields, schema)
    return args, arg_form.with_errors(fields, errors), errors


def _result(request, ctx: dict, fields: list) -> TemplateResponse:
    """The run's result, with each argument's error (or none) swapped in beside its field."""
    return TemplateResponse(request, "tools/_result.html", {**ctx, "fields": fields, "form_key": "wb"})


@login_required
@require_POST
def tool_run(request):
    """Run unsaved source with the form's arguments in the sandbox; shows status, value, output, duration, sandbox."""

    source = request.POST.get("source_code", "")
    schema, error = _derive(source)
    ctx, fields = {"error": error}, []
    if not error:
        args, fields, arg_errors = _arguments(request, schema)
        try:
            env = {k: v for k, v in _env_changes(request.POST).items() if v is not None}
        except ValueError:
            env, ctx["error"] = {}, "env vars: must be a JSON object of strings"
        if arg_errors:
            ctx["arg_errors"] = arg_form.errors_text(arg_errors)
        elif not ctx["error"]:
            agent_id = request.POST.get("agent_id") or None
            try:
                ctx["result"] = web_workbench.run(
                    owner=org(request),
                    source_code=source,
                    args=args,
                    env_vars=env,
                    tool_id=request.POST.get("tool_id") or None,
                    agent_id=agent_id,
                    allow_network=_network_choice(request.POST.get("allow_network", "")),
                    run_key=request.POST.get("run_key", "")[:64],
                )
                ctx["lacks"] = web_workbench.missing_without_agent(source, schema) if not agent_id else []
            except (DomainError, ValueError) as exc:
                ctx["error"] = str(exc)
    return _result(request, ctx, fields)


@login_required
@require_POST
def tool_run_saved(request, tool_id: str):
    """Run a saved MCP or built-in tool with the form's arguments (a built-in as the chosen agent)."""

    try:
        tool = selectors.tool_get(owner=org(request), tool_id=tool_id)
    except DomainError as exc:
        raise Http404(str(exc)) from exc
    args, fields, arg_errors = _arguments(request, tool.json_schema)
    ctx = {"arg_errors": arg_form.errors_text(arg_errors)} if arg_errors else {}
    if not arg_errors:
        try:
            ctx["result"] = web_workbench.run_saved(
                owner=org(request), tool_id=tool.id, args=args, agent_id=request.POST.get("agent_id") or None
            )
        except DomainError as exc:
            ctx["error"] = exc.message
    return _result(request, ctx, fields)


@login_required
def tool_run_output(request):
    """What the page's run in progress (its `run_key`) prints, as it prints it (server-sent events)."""

    since = request.headers.get("Last-Event-ID", "")
    return event_stream(
        web_workbench.output_events(
            owner=org(request),
            run_key=request.GET.get("run_key", "")[:64],
            since=int(since) if since.isdigit() else 0,
        )
    )


@login_required
@require_POST
def tool_save(request):
    """Save the editor's tool; the page stays as it is (arguments, result), a new tool gets its id and URL."""
    try:
        with noted(request.POST.get("version_message")):  # the note goes with the versions of the agents using it
            tool = tool_save_source(
                owner=org(request),
                source_code=request.POST.get("source_code", ""),
                tool_id=request.POST.get("tool_id") or None,
                env_vars=_env_changes(request.POST),
                sandbox=request.POST.get("sandbox", ""),
                pip_requirements=pip_parse(request.POST.get("pip_requirements", "")),
                allow_network=_network_choice(request.POST.get("allow_network", "")),
                # unticked is Letta's default (null), which asks no approval either
                default_requires_approval=True if request.POST.get("default_requires_approval") == "on" else None,
            )
    except (DomainError, ValueError, tool_schema.SchemaError) as exc:
        return TemplateResponse(request, "tools/_saved.html", {"error": str(exc)})
    created = not request.POST.get("tool_id")
    response = TemplateResponse(
        request,
        "tools/_saved.html",
        {
            "tool": tool,
            "env_keys": sorted(tool.env_vars or {}),
            "created": created,
            "library": list(selectors.tools_list(owner=org(request))) if created else [],
        },
    )
    return push_url(response, reverse("tools") + f"?tool={tool.id}") if not request.POST.get("tool_id") else response


@login_required
@require_POST
def tool_run_cancel(request):
    """Stop the page's run in progress (its `run_key`); the run's own request then answers "cancelled". The run may
    not have reached its sandbox yet when the person clicks: asked again every 0.25 s, for up to 5 s."""

    owner, run_key = org(request), request.POST.get("run_key", "")[:64]
    for _ in range(20):
        if web_workbench.cancel(owner=owner, run_key=run_key):
            return JsonResponse({"cancelled": True})
        time.sleep(0.25)
    return JsonResponse({"cancelled": False})


@login_required
@require_POST
def tool_delete(request, tool_id: str):
    """Delete a custom tool (the page listed the agents using it in its confirmation) and go back to the library."""

    try:
        services.tool_delete(tool=selectors.tool_get(owner=org(request), tool_id=tool_id))
    except DomainError as exc:
        return TemplateResponse(request, "tools/_saved.html", {"error": str(exc)})
    return HttpResponseClientRedirect(reverse("tools"))


@login_required
@require_POST
def tool_attach(request, tool_id: str):
    owner = org(request)
    try:
        tool = selectors.tool_get(owner=owner, tool_id=tool_id)
        agent = agent_get(owner=owner, agent_id=request.POST.get("agent_id", ""))
    except DomainError as exc:
        raise Http404(str(exc)) from exc
    (services.tool_detach if request.POST.get("action") == "detach" else services.tool_attach)(agent=agent, tool=tool)

    return TemplateResponse(
        request,
        "tools/_attach.html",
        {
            "tool": tool,
            "agents": list(agents_list(owner=owner, limit=200)),
            "attached_ids": set(tool.agents.values_list("id", flat=True)),
        },
    )
