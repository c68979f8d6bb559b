"""The IDE sockets' frames: one renderer per agent and process draws each channel message once and every socket of
the agent sends the same frame; the texts the page shows (status line, a failed send's reason, the busy bar's) come
from the server."""

from unittest import mock

import pytest

from core.web import live

pytestmark = pytest.mark.django_db


def test_every_socket_of_an_agent_sends_the_frame_rendered_once():
    a, b = live.renderer_open("agent-1", {}), live.renderer_open("agent-1", {})
    assert a is b and a is not live.renderer_open("agent-2", {})
    message = {"run_id": "run-1", "events": [{"message_type": "assistant_message", "id": "m-1", "content": "hi"}]}
    with mock.patch.object(live, "item_html", wraps=live.item_html) as drawn:
        assert a.frame_sent(message) is None
        frame = a.frame(message, message["events"])
        assert b.frame_sent(message) == frame  # the same message object (the embedded layer)
        a.layer_shared = True
        assert b.frame_sent({**message}) == frame  # an equal copy (a shared layer's)
    assert drawn.call_count == 1 and '"html"' in frame and "hi" in frame
    for agent_id in ("agent-1", "agent-1", "agent-2"):
        live.renderer_close(agent_id)
    assert "agent-1" not in live._renderers and "agent-2" not in live._renderers


@pytest.mark.parametrize(
    ("event", "label"),
    [
        ({"status": "created", "run_id": "run-0123456789"}, "running …23456789…"),
        (
            {"status": "completed", "stop_reason": "end_turn", "waiting": {"kind": "breakpoint"}},
            "paused at a breakpoint",
        ),
        (
            {"status": "completed", "stop_reason": "requires_approval", "waiting": {"kind": "client"}},
            "waiting for the client",
        ),
        (
            {"status": "completed", "stop_reason": "requires_approval", "waiting": {"kind": "approval"}},
            "waiting for approval",
        ),
        ({"status": "completed", "stop_reason": "cancelled"}, "cancelled"),
        ({"status": "failed", "stop_reason": "error"}, "failed · error"),
        ({"status": "completed", "stop_reason": "completed"}, "completed"),
    ],
)
def test_the_status_line_says_what_the_run_status_means(event, label):
    out = live.renderer_open("agent-s", {}).event({"message_type": "run_status", **event})
    live.renderer_close("agent-s")
    assert out["label"] == label


def test_an_error_carries_the_texts_the_page_shows():
    renderer = live.LiveRenderer("agent-e")
    unknown = renderer.event(
        {"message_type": "error_message", "message": "Unknown model.", "detail": {"available": ["a/x", "b/y"]}}
    )
    assert unknown["reason"] == "Unknown model. Available models: a/x, b/y" and "busy_text" not in unknown
    detail = {"code": "PENDING_APPROVAL", "run_id": "run-1", "tool_calls": [{"tool_call_id": "c", "name": "rm"}]}
    waits = renderer.event(
        {"message_type": "error_message", "message": "The agent is waiting for approval.", "detail": detail}
    )
    assert waits["busy_text"] == "The agent is waiting for approval. Waiting: rm. Your message is back in the box."
    held = renderer.event({"message_type": "error_message", "message": "x", "detail": {**detail, "tool_calls": []}})
    assert held["busy_text"].startswith("The agent is paused at a breakpoint before a model call")
