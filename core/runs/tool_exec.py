"""Running an agent's tool calls in two phases: every call runs before the step's transaction, in the order
the model made them (sandboxes, provider calls for embeddings, waits on other agents' runs); what a call
writes (a block edit, an archival insert) is kept as an `effect` and applied in the commit phase, so the
step's transaction holds its locks only for its own writes.
"""

import json
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace

from django.db import transaction

from core.agents.context import agent_snapshot
from core.engine import loop, memory_ops
from core.engine import types as t
from core.engine.base_tools import (
    FILE_TOOL_NAMES,
    MEMORY_EDIT_TOOLS,
    MULTI_AGENT_TOOL_NAMES,
    WEB_TOOL_NAMES,
    is_builtin,
)
from core.engine.loop import ParsedCall
from core.errors import Busy, DomainError, Invalid
from core.ids import new_id
from core.models import RUN_ACTIVE, Agent, Run
from core.runs import recall
from core.telemetry import hooks as telemetry
from core.transactions import outside_transaction
from memory import services as memory_services
from memory.files import tools as file_tools
from tools.execution import tool_execute
from tools.letta_tools import PLANNED_TOOLS, VOICE_TOOLS, letta_tool_prepare
from tools.mcp_services import mcp_tool_execute
from tools.web_tools import web_tool_execute


@dataclass
class ToolOutcome:
    """What one call produced: the raw return (or error text) plus what the sandbox captured."""

    ok: bool
    value: str
    stdout: str = ""
    stderr: str = ""
    duration_ms: float = 0.0
    sandbox: str = ""
    _: KW_ONLY  # the rest by name: at most six positional parameters
    tool_run: object | None = None  # an unsaved tools.models.ToolRun for custom tools
    memory_edit: bool = False
    extra: dict = field(default_factory=dict)
    effect: Callable[[], object] | None = None  # the write to apply in the commit phase
    sandbox_start_ms: float | None = None  # the part of duration_ms its sandbox took to start (None: no sandbox)

    def content(self, return_char_limit: int) -> str:
        """The tool message the model reads ({status, message, time}, truncated with a note)."""
        return loop.format_tool_result(ok=self.ok, message=self.value, return_char_limit=return_char_limit)

    def tool_return(self) -> dict:
        return {
            "status": "success" if self.ok else "error",
            "stdout": self.stdout,
            "stderr": self.stderr,
            "duration_ms": round(self.duration_ms, 3),
            "sandbox": self.sandbox,
            **({"sandbox_start_ms": round(self.sandbox_start_ms, 3)} if self.sandbox_start_ms is not None else {}),
        }


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _memory_edit(call, snap, step_id: str) -> ToolOutcome:
    """Compute the edit now (later calls of the same reply see it); write the block in the commit phase, made again
    on the block's value then if another writer changed it meanwhile (the agent's other threads share its blocks)."""
    edit = memory_ops.apply_memory_tool(call.name, call.args, snap.blocks)
    index = next(i for i, b in enumerate(snap.block_rows) if b.label == edit.label)
    if snap.blocks[index].read_only:
        raise memory_ops.MemoryEditError(f"Block '{edit.label}' is read-only; it cannot be edited by the agent.")
    read = snap.blocks[index]
    snap.blocks[index] = replace(read, value=edit.new_value)

    def rebase(current: str) -> str:
        if current == edit.old_value:
            return edit.new_value
        return memory_ops.apply_memory_tool(call.name, call.args, [replace(read, value=current)]).new_value

    def write():
        with telemetry.memory_edit(label=edit.label, tool=call.name, agent_id=snap.agent.id):
            snap.block_rows[index] = memory_services.block_update(
                block=snap.block_rows[index],
                changes={},
                agent_id=snap.agent.id,
                step_id=step_id,
                tool_call_id=call.call.id,
                enforce_read_only=True,
                rebase=rebase,
            )

    return ToolOutcome(True, memory_ops.edit_result_text(edit), memory_edit=True, effect=write)


def _web(call, snap, step_id: str) -> ToolOutcome:
    """web_search / fetch_webpage in this process (HTTP through the egress guard); the ToolRun is returned unsaved."""
    tool = snap.tool_row(call.name)
    try:
        run = web_tool_execute(
            owner=snap.agent.owner,
            name=call.name,
            args=call.args,
            tool=tool,
            agent=snap.agent,
            step_id=step_id,
            record=False,
        )
    except DomainError as exc:
        return ToolOutcome(False, loop.tool_error_text(call.name, exc.message, "InvalidArguments"))
    ok = run.status == "success"
    value = run.tool_return if ok else loop.tool_error_text(call.name, run.tool_return, run.error_type or "Error")
    return ToolOutcome(ok, value, "", run.stderr, tool_run=run)


def _files(call, agent) -> ToolOutcome:
    """The file tools read the agent's attached files (open_files also marks what it opened, in this step: the
    next step's files section shows it); a bad request's error is the bare message, as Letta returns it."""
    a = call.args
    if call.name == "open_files":
        requests = a.get("file_requests")
        if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
            raise Invalid("file_requests must be a list of {file_name, offset?, length?} objects")
        text = file_tools.open_files(
            agent=agent, file_requests=requests, close_all_others=bool(a.get("close_all_others"))
        )
    elif call.name == "grep_files":
        text = file_tools.grep_files(
            agent=agent,
            pattern=str(a.get("pattern") or ""),
            include=a.get("include") if isinstance(a.get("include"), str) else None,
            context_lines=_whole(a.get("context_lines"), 1),
            offset=_whole(a.get("offset"), 0),
        )
    else:
        text = file_tools.semantic_search_files(
            agent=agent, query=str(a.get("query") or ""), limit=_whole(a.get("limit"), 5)
        )
    return ToolOutcome(True, text)


def _whole(value, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"expected a whole number, got {value!r}")
    return value


def _builtin(call, snap, step_id: str) -> ToolOutcome:
    a, agent = call.args, snap.agent
    if call.name in WEB_TOOL_NAMES:
        return _web(call, snap, step_id)
    if call.name in ("send_message", "memory_finish_edits"):
        return ToolOutcome(True, "None")
    if call.name in FILE_TOOL_NAMES:
        return _files(call, agent)
    if call.name in MEMORY_EDIT_TOOLS:
        try:
            return _memory_edit(call, snap, step_id)
        except memory_ops.BlockChangesNeeded:
            pass  # blocks created, deleted or renamed: Letta's memory tools' own path below
    if call.name in PLANNED_TOOLS or call.name in VOICE_TOOLS:
        said = next((m.content for m in reversed(snap.body) if m.role == "user"), "")
        prepared = letta_tool_prepare(
            name=call.name,
            args=a,
            agent=agent,
            blocks=snap.blocks,
            user_query=said,
            step_id=step_id,
            tool_call_id=call.call.id,
        )
        return ToolOutcome(True, prepared.value, memory_edit=bool(prepared.changes), effect=prepared.effect)
    if call.name == "archival_memory_insert":
        write = recall.archival_insert_prepare(agent=agent, content=str(a.get("content", "")), tags=a.get("tags"))
        return ToolOutcome(True, recall.INSERTED, effect=write)
    if call.name == "archival_memory_search":
        hits = recall.archival_search(
            agent=agent,
            query=str(a.get("query", "")),
            tags=a.get("tags"),
            tag_match_mode=a.get("tag_match_mode") or "any",
            top_k=a.get("top_k"),
            start_datetime=a.get("start_datetime"),
            end_datetime=a.get("end_datetime"),
        )
        return ToolOutcome(True, _json(hits) if hits else "No results found.")
    if call.name == "conversation_search":
        hits = recall.conversation_search(
            agent=agent,
            query=str(a.get("query", "")),
            roles=a.get("roles"),
            limit=a.get("limit"),
            start_date=a.get("start_date"),
            end_date=a.get("end_date"),
        )
        return ToolOutcome(True, _json(hits) if hits else "No results found.")
    return ToolOutcome(
        False,
        loop.tool_error_text(
            call.name, "this built-in tool is not available in this deployment", "NotImplementedError"
        ),
    )


def builtin_run(call, snap, step_id: str) -> ToolOutcome:
    """Run one built-in tool call in-process (reads, embeddings; its write becomes the outcome's effect)."""
    started = time.perf_counter()
    try:
        out = _builtin(call, snap, step_id)
    except (memory_ops.MemoryEditError, DomainError, ValueError) as exc:
        out = ToolOutcome(False, getattr(exc, "message", None) or str(exc))
    out.duration_ms = (time.perf_counter() - started) * 1000
    out.sandbox = "in-process"
    return out


def custom_run(call, tool, snap, step_id: str) -> ToolOutcome:
    """Run one custom tool call in its sandbox (subprocess or E2B; seconds); its ToolRun is returned unsaved."""

    try:
        run = tool_execute(
            owner=snap.agent.owner,
            source_code=tool.source_code,
            args=call.args,
            tool=tool,
            agent=snap.agent,
            origin="agent",
            step_id=step_id,
            record=False,
        )
    except DomainError as exc:
        return ToolOutcome(False, loop.tool_error_text(call.name, exc.message, "InvalidArguments"))
    result = run.result
    ok = result.status == "success"
    value = (
        result.tool_return
        if ok
        else loop.tool_error_text(call.name, result.error_message or result.tool_return, result.error_type or "Error")
    )
    return ToolOutcome(
        ok,
        value,
        result.stdout,
        result.stderr,
        result.duration_ms,
        run.sandbox,
        tool_run=run,
        sandbox_start_ms=result.start_ms,
    )


def mcp_run(call, tool, snap, step_id: str) -> ToolOutcome:
    """Run one MCP tool call on its server (starts or restarts it; seconds); its ToolRun is returned unsaved."""

    try:
        run = mcp_tool_execute(
            tool=tool, args=call.args, agent=snap.agent, origin="agent", step_id=step_id, record=False
        )
    except DomainError as exc:
        return ToolOutcome(False, loop.tool_error_text(call.name, exc.message, "InvalidArguments"))
    ok = run.status == "success"
    value = run.tool_return if ok else loop.tool_error_text(call.name, run.tool_return, run.error_type or "Error")
    return ToolOutcome(ok, value, "", run.stderr, run.duration_ms, f"mcp:{run.mcp_server}", tool_run=run)


# The multi-agent tools' runner, core.runs.multiagent.tool_run, set by CoreConfig.ready: it starts other agents'
# runs through the executor, which calls the runner that calls this module, so importing it would close a cycle.
multi_agent_tool_run: Callable[..., ToolOutcome] | None = None


def multi_agent_run(call, snap, step_id: str) -> ToolOutcome:
    """Run one multi-agent tool call (outside the step's transaction: it may wait for another agent's run)."""
    if multi_agent_tool_run is None:
        raise RuntimeError("core.runs.multiagent is not connected: CoreConfig.ready has not run")
    started = time.perf_counter()
    out = multi_agent_tool_run(call, snap, step_id)
    out.duration_ms = (time.perf_counter() - started) * 1000
    out.sandbox = "in-process"
    return out


def calls_run(parsed, snap, step_id: str) -> dict[int, ToolOutcome]:
    """Run the reply's valid calls in order, outside any transaction, keyed by their position in the reply."""
    outside_transaction("running tool calls")
    kinds = {t.name: t.kind for t in snap.tools}
    out: dict[int, ToolOutcome] = {}
    for i, call in enumerate(parsed.calls):
        if call.valid:
            with telemetry.tool_call(call.name, call.call.id) as traced:
                out[i] = traced.done(_call_run(call, kinds.get(call.name, ""), snap, step_id))
    return out


def _call_run(call, kind: str, snap, step_id: str) -> ToolOutcome:
    if call.name in MULTI_AGENT_TOOL_NAMES:
        return multi_agent_run(call, snap, step_id)
    if is_builtin(call.name) and kind != "custom":
        # (a custom tool made under a web tool's name before that was built in stays the owner's code)
        return builtin_run(call, snap, step_id)
    tool = snap.tool_row(call.name)  # the row (code, sandbox, server) is read only for a tool that runs from it
    if tool is None:
        return ToolOutcome(False, loop.tool_error_text(call.name, "the tool was deleted during the step", "NotFound"))
    if tool.tool_type == "external_mcp":
        return mcp_run(call, tool, snap, step_id)
    return custom_run(call, tool, snap, step_id)


def effects_apply(outcomes: dict[int, ToolOutcome]) -> None:
    """Commit phase (caller holds the agent's lock in the step's transaction): apply each call's write; a write
    refused now (a block made read-only or too small meanwhile) turns its call into an error for the model."""
    for i, out in outcomes.items():
        if out.effect is None:
            continue
        try:
            out.effect()
        except (memory_ops.MemoryEditError, DomainError, ValueError) as exc:
            outcomes[i] = ToolOutcome(
                False, getattr(exc, "message", None) or str(exc), duration_ms=out.duration_ms, sandbox=out.sandbox
            )


def agent_builtin_tool_run(*, agent: Agent, name: str, args: dict) -> dict:
    """Run one of the agent's built-in tools outside a step, as Letta's `agents.tools.run` does: reads (searches)
    answer at once; a write (a block edit, an archival insert) is applied under the agent's row lock in its own
    transaction. Conflict while a run of the agent is active; multi-agent tools are refused (they wait on other
    agents). Returns Letta's ToolExecutionResult shape."""
    if name in MULTI_AGENT_TOOL_NAMES:
        raise Invalid(f"'{name}' messages other agents; it runs only inside the agent's steps")
    if not isinstance(args, dict):
        raise Invalid("args must be an object of the tool's arguments")
    call = ParsedCall(
        call=t.ToolCall(id=new_id("call"), name=name, arguments=json.dumps(args, default=str)),
        args=args,
        thinking=None,
        request_heartbeat=False,
    )
    started = time.perf_counter()
    out = builtin_run(call, agent_snapshot(agent=agent), "")
    if out.ok and out.effect is not None:
        with transaction.atomic():
            Agent.objects.select_for_update().filter(pk=agent.pk).first()
            busy = Run.objects.filter(agent=agent, status__in=RUN_ACTIVE).values_list("id", flat=True).first()
            if busy is not None:
                raise Busy(f"The agent is busy with run '{busy}'; wait for it before running '{name}'.", run_id=busy)
            out.effect()
    return {
        "status": "success" if out.ok else "error",
        "func_return": out.value,
        "tool_return": out.value,
        "stdout": [],
        "stderr": [],
        "agent_state": None,
        "sandbox_config_fingerprint": None,
        "sandbox": "in-process",
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }
