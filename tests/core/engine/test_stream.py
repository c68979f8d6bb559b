"""Token streaming in the pure engine: deltas become chunks of the message the step will store."""

import json

import pytest

from core.engine.stream import ChunkBuilder, coalesce, partial_string_values
from core.engine.types import Delta


def _builder(**kw) -> ChunkBuilder:
    return ChunkBuilder(
        message_id="message-1", run_id="run-1", step_id="step-1", date="2026-01-01T00:00:00+00:00", **kw
    )


def _feed_arguments(builder, name, arguments: str, size: int, index=0, call_id="call_1"):
    chunks = builder.feed(Delta("tool_call", "", index, call_id, name))
    for i in range(0, len(arguments), size):
        chunks += builder.feed(Delta("tool_call", arguments[i : i + size], index, call_id, name))
    return chunks


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_send_message_streams_only_its_message_and_thinking_whatever_the_fragment_size(size):
    message = 'Caf\u00e9 "quoted" \\ back\nslash \u2603 done'
    arguments = json.dumps({"thinking": 'the user wants "this"', "message": message, "request_heartbeat": False})
    chunks = _feed_arguments(_builder(), "send_message", arguments, size)
    assert all(c["id"] == "message-1" and c["delta"] is True and c["step_id"] == "step-1" for c in chunks)
    assert {c["message_type"] for c in chunks} == {"reasoning_message", "assistant_message"}
    assert "".join(c["content"] for c in chunks if c["message_type"] == "assistant_message") == message
    assert (
        "".join(c["reasoning"] for c in chunks if c["message_type"] == "reasoning_message") == 'the user wants "this"'
    )
    assert all(c["source"] == "non_reasoner_model" for c in chunks if c["message_type"] == "reasoning_message")


def test_other_tools_stream_their_argument_fragments_and_their_thinking():
    arguments = json.dumps({"thinking": "look it up", "query": "cats", "request_heartbeat": True})
    chunks = _feed_arguments(_builder(), "archival_memory_search", arguments, 5)
    calls = [c for c in chunks if c["message_type"] == "tool_call_message"]
    assert (
        calls[0]["tool_call"]["name"] == "archival_memory_search" and calls[0]["tool_call"]["tool_call_id"] == "call_1"
    )
    assert "".join(c["tool_call"]["arguments"] or "" for c in calls) == arguments
    # The reasoning streams first and the call follows, in the order the stored message shows them.
    kinds = [c["message_type"] for c in chunks]
    assert kinds.index("tool_call_message") > max(i for i, k in enumerate(kinds) if k == "reasoning_message")
    assert all(c["tool_calls"] == [c["tool_call"]] for c in calls)
    assert "".join(c["reasoning"] for c in chunks if c["message_type"] == "reasoning_message") == "look it up"


def test_native_reasoning_and_text_stream_as_they_arrive():
    b = _builder()
    chunks = b.feed(Delta("reasoning", "hmm ")) + b.feed(Delta("reasoning", "ok")) + b.feed(Delta("text", "Hi"))
    assert [(c["message_type"], c.get("reasoning") or c.get("content")) for c in chunks] == [
        ("reasoning_message", "hmm "),
        ("reasoning_message", "ok"),
        ("assistant_message", "Hi"),
    ]
    assert chunks[0]["source"] == "reasoner_model" and b.feed(Delta("text", "")) == []


def test_send_message_shown_as_a_tool_call_when_assistant_messages_are_off():
    chunks = _feed_arguments(_builder(use_assistant_message=False), "send_message", '{"message": "hi"}', 4)
    assert {c["message_type"] for c in chunks} == {"tool_call_message"}


def test_two_calls_in_one_reply_stream_separately():
    b = _builder()
    first = _feed_arguments(b, "send_message", '{"message": "one"}', 3, index=0, call_id="a")
    second = _feed_arguments(b, "send_message", '{"message": "two"}', 3, index=1, call_id="b")
    assert "".join(c["content"] for c in first) == "one" and "".join(c["content"] for c in second) == "two"


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"message": "hel', {"message": "hel"}),
        ('{"message": "a\\', {"message": "a"}),
        ('{"message": "a\\u00', {"message": "a"}),
        ('{"mess', {}),
        ("not json", {}),
        ('["list"]', {}),
        ('{"message": 3, "x": "y"}', {"x": "y"}),
    ],
)
def test_partial_values(text, expected):
    assert partial_string_values(text) == expected


def _spelled(events):
    """What a reader of the chunks puts together: the text of each message part, in order."""
    out: dict = {}
    for e in events:
        if e.get("delta"):
            key = (e["id"], e["message_type"], e["otid"])
            text = e.get("reasoning") or e.get("content") or (e.get("tool_call") or {}).get("arguments") or ""
            out[key] = out.get(key, "") + text
    return out


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_coalesce_merges_each_parts_chunks_and_keeps_what_they_spell(size):
    arguments = json.dumps({"thinking": "look it up", "query": "cats"})
    b = _builder()
    chunks = _feed_arguments(b, "archival_memory_search", arguments, size)
    chunks += _feed_arguments(b, "archival_memory_search", json.dumps({"query": "dogs"}), size, 1, "call_2")
    merged, flags = coalesce(chunks, [True] * len(chunks))
    assert flags == [True] * len(merged)
    assert _spelled(merged) == _spelled(chunks)
    kinds = [(c["message_type"], (c.get("tool_call") or {}).get("tool_call_id")) for c in merged]
    # one reasoning chunk, one per call (two calls' fragments are never merged), in their order
    assert kinds == [("reasoning_message", None), ("tool_call_message", "call_1"), ("tool_call_message", "call_2")]
    assert [c["tool_call"]["arguments"] for c in merged[1:]] == [arguments, json.dumps({"query": "dogs"})]
    assert all(c["tool_calls"] == [c["tool_call"]] and c["tool_call"]["name"] for c in merged[1:])


def test_coalesce_leaves_whole_events_other_flags_and_calls_without_ids_apart():
    b = _builder()
    r1, r2 = b.feed(Delta("reasoning", "a")) + b.feed(Delta("reasoning", "b"))
    whole = {"id": "message-1", "message_type": "reasoning_message", "reasoning": "ab"}
    status = {"message_type": "run_status", "status": "running"}
    nameless = [
        {**r1, "message_type": "tool_call_message", "tool_call": {"name": "f", "arguments": "{", "tool_call_id": None}},
        {**r1, "message_type": "tool_call_message", "tool_call": {"name": "f", "arguments": "}", "tool_call_id": None}},
    ]
    events = [status, r1, r2, whole, r1, r2, r2, *nameless]
    flags = [False, True, True, True, True, False, False, True, True]
    merged, out_flags = coalesce(events, flags)
    assert [(e["message_type"], e.get("reasoning"), f) for e, f in zip(merged, out_flags, strict=True)][:5] == [
        ("run_status", None, False),
        ("reasoning_message", "ab", True),  # r1 + r2
        ("reasoning_message", "ab", True),  # the whole message stays itself
        ("reasoning_message", "a", True),  # a chunk for the caller...
        ("reasoning_message", "bb", False),  # ...and the two that are not stay apart from it
    ]
    assert merged[5:] == nameless  # calls without an id cannot be told apart: left as they are
    assert (r1["reasoning"], r2["reasoning"]) == ("a", "b")  # the inputs are not changed
