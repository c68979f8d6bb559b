"""A run as a layered graph for the IDE (server-rendered SVG): the run, each step's model call top to bottom, its tool
calls (with their sandbox) under it, a wait for a person at the end, and the run of another agent a send tool call
reached as a branch to its right. A sequential layout: each node takes the next row of its column; no general
layout engine."""

from dataclasses import dataclass, field

from core.agents.run_view import MAX_DEPTH, MAX_NODES, SEND_TOOLS, LoadedRun, run_load, step_numbers
from core.models import Message, Run

COL, NODE_W, NODE_H, GAP, INDENT = 250, 220, 38, 14, 24


@dataclass
class Node:
    kind: str  # run | model | tool | wait | agent
    title: str
    sub: str
    x: int
    y: int
    w: int
    agent_id: str
    step_id: str = ""
    run_id: str = ""
    error: bool = False
    tip: str = ""


@dataclass
class _Graph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[str] = field(default_factory=list)  # SVG path data
    y: int = 8

    def add(self, node: Node, after: Node | None) -> Node:
        self.nodes.append(node)
        self.y = max(self.y, node.y + NODE_H + GAP)
        if after is not None:
            self.edges.append(_edge(after, node))
        return node


def _edge(a: Node, b: Node) -> str:
    """SVG path data from a to b: down the column's left gutter, into an indented node, or across to a branch."""
    mid = NODE_H // 2
    if b.x >= a.x + a.w:  # another agent's run, to the right
        turn = (a.x + a.w + b.x) // 2
        return f"M{a.x + a.w},{a.y + mid} H{turn} V{b.y + mid} H{b.x}"
    if b.x > a.x:  # a tool call under its step
        return f"M{a.x + 12},{a.y + NODE_H} V{b.y + mid} H{b.x}"
    return f"M{b.x + 12},{a.y + NODE_H} V{b.y}"


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _is_send(tool: Message) -> bool:
    return tool.name.startswith(SEND_TOOLS)


def _layout(g: _Graph, loaded: LoadedRun, column: int, y: int, parent: Node | None, depth: int) -> None:
    """Lay the run out in its column from `y` down; a tool call that reached another agent's run gets that run laid
    out in the next column from the call's row."""
    run, x = loaded.run, 8 + column * COL
    first = loaded.steps[0].id if loaded.steps else ""
    title, sub = _clip(run.agent.name, 26), f"run {run.id[-8:]} · {run.status}"
    head = g.add(Node("run", title, sub, x, y, NODE_W, run.agent_id, first, run.id, tip=run.id), parent)
    last, numbers = head, step_numbers(loaded)
    children = list(loaded.children) if depth < MAX_DEPTH else []
    for step in loaded.steps:
        if len(g.nodes) >= MAX_NODES:
            return
        last = _step_nodes(g, loaded, step, numbers.get(step.id), last, children, column, depth)
    if run.waiting or loaded.answered_at:
        kind = (run.waiting or {}).get("kind") or "approval"
        names = ", ".join(c.get("name", "") for c in (run.waiting or {}).get("calls", []))
        sub = _clip(names or ("answered" if loaded.answered_at else ""), 30)
        step_id = (run.waiting or {}).get("step_id") or ""
        g.add(Node("wait", f"waits for a person ({kind})", sub, x, g.y, NODE_W, run.agent_id, step_id, run.id), last)
    for child in children:  # reached without a send tool we could place (e.g. a sleep-time companion)
        _layout(g, run_load(child), column + 1, g.y, head, depth + 1)


def _step_nodes(g: _Graph, loaded: LoadedRun, step, number, last: Node, children: list, column: int, depth: int):
    """A step's model-call node under `last`, its tool calls under it, and the runs its send calls reached (taken
    from `children`) to the right; returns the model-call node."""
    run, x = loaded.run, 8 + column * COL
    title = f"step {number} · model call" if number else f"{step.kind} step"
    sub = f"{_clip(step.model, 20)} · {step.model_ms:.0f} ms" if not step.error else _clip(step.error, 30)
    tip = f"{title} · {step.model} · index {step.index} in run {run.id}"
    node = Node("model", title, sub, x, g.y, NODE_W, step.agent_id, step.id, run.id, error=bool(step.error), tip=tip)
    g.add(node, last)
    above = node
    for tool in loaded.tools.get(step.id, []):
        ret = tool.tool_return or {}
        sub = f"{ret.get('sandbox') or 'no sandbox'} · {float(ret.get('duration_ms') or 0):.0f} ms"
        failed = ret.get("status") == "error"
        tnode = Node(
            "tool",
            _clip(tool.name, 24),
            sub,
            x + INDENT,
            g.y,
            NODE_W - INDENT,
            step.agent_id,
            step.id,
            run.id,
            error=failed,
            tip=tool.name,
        )
        above = g.add(tnode, above)
        if _is_send(tool):
            for child in [c for c in children if c.created_at <= step.created_at]:
                children.remove(child)
                _layout(g, run_load(child), column + 1, tnode.y, tnode, depth + 1)
    return node


def run_graph(*, run: Run) -> dict:
    """The run as a layered graph: nodes (with their box, text and the step each opens) and edge paths, sized for
    an SVG. Reads the run, its steps, tool messages and the runs it reached in other agents; writes nothing."""
    g = _Graph()
    _layout(g, run_load(run), 0, 8, None, 0)
    width = max(n.x + n.w for n in g.nodes) + 8
    return {"nodes": g.nodes, "edges": g.edges, "width": width, "height": g.y, "truncated": len(g.nodes) >= MAX_NODES}
