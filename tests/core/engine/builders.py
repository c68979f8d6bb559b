"""Message builders for engine tests (token counts filled as the runner would)."""

from core.engine import tokens
from core.engine.types import Message, Role, ToolCall

MODEL = "openai/fake-model"


def msg(i: int, role: Role = Role.USER, content: str = "", **kw) -> Message:
    m = Message(id=f"message-{i}", role=role, content=content or f"message number {i}", **kw)
    return tokens.with_token_count(MODEL, m)


def tool_exchange(i: int, name: str = "core_memory_append") -> list[Message]:
    call = ToolCall(id=f"call-{i}", name=name, arguments='{"label": "human", "content": "x"}')
    return [
        msg(i, Role.ASSISTANT, " ", tool_calls=(call,)),
        msg(i + 1, Role.TOOL, '{"status": "OK"}', tool_call_id=f"call-{i}", name=name),
    ]
