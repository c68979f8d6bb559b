"""What the agent websocket does with a message from the browser."""

from core.accounts import Principal


async def handle_client_message(*, principal: Principal, agent_id: str, payload: dict) -> dict | None:
    """Dispatch one client message; returns a direct reply for this socket, or None."""
    kind = payload.get("type")
    if kind == "ping":
        return {"message_type": "pong"}
    return {"message_type": "error_message", "message": f"Unknown message type: {kind!r}"}
