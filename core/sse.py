"""The one server-sent-events response every stream goes out in (a run's events, a resumed stream, the OpenAI
route's chunks, a workbench run's output)."""

from collections.abc import AsyncIterable, Iterable

from django.http import StreamingHttpResponse


def event_stream(frames: Iterable[str] | AsyncIterable[str]) -> StreamingHttpResponse:
    """`frames` (each a whole event, `data: …` and its blank line) sent as they come, never cached nor buffered by
    a proxy."""
    response = StreamingHttpResponse(frames, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
