"""Running an agent's tool calls: built-in tools in-process, custom tools in their sandbox.

Custom and multi-agent tools run outside the step's transaction (they may take seconds, call our own API or
wait for another agent's run, core.multiagent); the other built-in tools run inside it, so their memory writes commit or roll back with the step.
"""

import json
import time
from dataclasses import dataclass, field

from core.engine import loop, memory_ops
from core.engine.base_tools import MEMORY_EDIT_TOOLS, MULTI_AGENT_TOOL_NAMES, is_builtin
from core.errors import DomainError
from core.runtime import recall


@dataclass
class ToolOutcome:
    """What one call produced: the raw return (or error text) plus what the sandbox captured."""

    ok: bool
    value: str
    stdout: str = ""
    stderr: str = ""
    duration_ms: float = 0.0
    sandbox: str = ""
    tool_run: object | None = None  # an unsaved tools.models.ToolRun for custom tools
    memory_edit: bool = False
    extra: dict = field(default_factory=dict)

    def content(self, return_char_limit: int) -> str:
        """The tool message the model reads ({status, message, time}, truncated with a note)."""
        return loop.format_tool_result(ok=self.ok, message=self.value, return_char_limit=return_char_limit)

    def tool_return(self) -> dict:
        return {"status": "success" if self.ok else "error", "stdout": self.stdout, "stderr": self.stderr,
                "duration_ms": round(self.duration_ms, 3), "sandbox": self.sandbox}


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _memory_edit(call, snap, step_id: str) -> ToolOutcome:
    from memory.services import block_update

    edit = memory_ops.apply_memory_tool(call.name, call.args, snap.blocks)
    index = next(i for i, b in enumerate(snap.block_rows) if b.label == edit.label)
    row = block_update(block=snap.block_rows[index], changes={"value": edit.new_value}, agent_id=snap.agent.id,
                       step_id=step_id, tool_call_id=call.call.id, enforce_read_only=True)
    from core import mapping

    # Later calls of the same reply must see this edit.
    snap.block_rows[index] = row
    snap.blocks[index] = mapping.block_spec(row)
    return ToolOutcome(True, memory_ops.edit_result_text(edit), memory_edit=True)


def _builtin(call, snap, step_id: str) -> ToolOutcome:
    a, agent = call.args, snap.agent
    if call.name == "send_message":
        return ToolOutcome(True, "None")
    if call.name in MEMORY_EDIT_TOOLS:
        return _memory_edit(call, snap, step_id)
    if call.name == "archival_memory_insert":
        return ToolOutcome(True, recall.archival_insert(agent=agent, content=str(a.get("content", "")), tags=a.get("tags")))
    if call.name == "archival_memory_search":
        hits = recall.archival_search(agent=agent, query=str(a.get("query", "")), tags=a.get("tags"),
                                      tag_match_mode=a.get("tag_match_mode") or "any", top_k=a.get("top_k"),
                                      start_datetime=a.get("start_datetime"), end_datetime=a.get("end_datetime"))
        return ToolOutcome(True, _json(hits) if hits else "No results found.")
    if call.name == "conversation_search":
        hits = recall.conversation_search(agent=agent, query=str(a.get("query", "")), roles=a.get("roles"),
                                          limit=a.get("limit"), start_date=a.get("start_date"), end_date=a.get("end_date"))
        return ToolOutcome(True, _json(hits) if hits else "No results found.")
    return ToolOutcome(False, loop.tool_error_text(call.name, "this built-in tool is not available in this deployment",
                                                   "NotImplementedError"))


def builtin_run(call, snap, step_id: str) -> ToolOutcome:
    """Run one built-in tool call in-process (inside the step's transaction; may edit blocks, insert passages)."""
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
    from tools.execution import tool_execute

    try:
        run = tool_execute(owner=snap.agent.owner, source_code=tool.source_code, args=call.args, tool=tool,
                           agent=snap.agent, origin="agent", step_id=step_id, record=False)
    except DomainError as exc:
        return ToolOutcome(False, loop.tool_error_text(call.name, exc.message, "InvalidArguments"))
    result = run.result
    ok = result.status == "success"
    value = result.tool_return if ok else loop.tool_error_text(call.name, result.error_message or result.tool_return,
                                                                result.error_type or "Error")
    return ToolOutcome(ok, value, result.stdout, result.stderr, result.duration_ms, run.sandbox, tool_run=run)


def multi_agent_run(call, snap, step_id: str) -> ToolOutcome:
    """Run one multi-agent tool call (outside the step's transaction: it may wait for another agent's run)."""
    from core.multiagent import tool_run

    started = time.perf_counter()
    out = tool_run(call, snap, step_id)
    out.duration_ms = (time.perf_counter() - started) * 1000
    out.sandbox = "in-process"
    return out


def _in_step(name: str) -> bool:
    return is_builtin(name) and name not in MULTI_AGENT_TOOL_NAMES


def calls_run(parsed, snap, step_id: str, *, builtin: bool) -> dict[int, ToolOutcome]:
    """Run the reply's valid calls of one phase (built-in: inside the step transaction; custom and multi-agent:
    before it), keyed by their position in the reply."""
    tools = {t.name: t for t in snap.tool_rows}
    out: dict[int, ToolOutcome] = {}
    for i, call in enumerate(parsed.calls):
        if not call.valid or _in_step(call.name) != builtin:
            continue
        if builtin:
            out[i] = builtin_run(call, snap, step_id)
        elif call.name in MULTI_AGENT_TOOL_NAMES:
            out[i] = multi_agent_run(call, snap, step_id)
        else:
            out[i] = custom_run(call, tools[call.name], snap, step_id)
    return out
