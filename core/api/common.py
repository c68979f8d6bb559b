"""What every API router shares: the caller's organization, the one paging schema list endpoints extend, and the
SSE response of a send (its OpenAPI description included)."""

from collections.abc import Callable
from typing import Any, Literal

from asgiref.sync import async_to_sync
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Field, Schema

from core.models import Organization
from core.runs.streaming import Subscription, sse_events, subscribe_sync
from core.sse import event_stream


def owner(request: HttpRequest) -> Organization:
    """The organization the request acts for (set by the API's authentication)."""
    return request.principal.org


def clamped(maximum: int) -> str:
    """The description of a page size the endpoint clamps rather than refuses."""
    return f"Page size; values outside 1..{maximum} are clamped to it."


class PageQuery(Schema):
    """Letta's cursor paging (core.pagination): `after`/`before` are item ids relative to the order asked for. Every
    list endpoint's query extends it and keeps its own Letta defaults by overriding a field in the subclass (`limit`
    and `order` differ between routes; `order_by` names the fields a route sorts by)."""

    before: str | None = None
    after: str | None = None
    limit: int | None = Field(50, description=clamped(1000))
    order: Literal["asc", "desc"] = "desc"
    order_by: Literal["created_at"] = "created_at"


class WholeListQuery(PageQuery):
    """A short list (an agent's blocks or tools, a block's agents): all of it, oldest first, unless asked otherwise."""

    limit: int | None = Field(None, description="Page size (all items when absent); clamped to 1..1000.")
    order: Literal["asc", "desc"] = "asc"


_SSE = {
    "text/event-stream": {
        "schema": {
            "type": "string",
            "description": "Server-sent events: each `data:` line holds one Letta message as JSON (then "
            "`stop_reason` and `usage_statistics`; `ping` while waiting), the last is `data: [DONE]`.",
        }
    }
}
SSE_ALSO = {"responses": {200: {"content": _SSE}}}  # with `streaming: true`
SSE_ONLY = {"responses": {200: {"description": "The run as it happens.", "content": _SSE}}}


def sse_response(
    run,
    *,
    types: list[str] | None,
    include_pings: bool,
    stream_tokens: bool,
    subscription: Subscription | None = None,
    use_assistant_message: bool = True,
) -> StreamingHttpResponse:
    """The run's events as server-sent events."""
    return event_stream(
        sse_events(
            run=run,
            types=types,
            include_pings=include_pings,
            stream_tokens=stream_tokens,
            subscription=subscription,
            use_assistant_message=use_assistant_message,
        )
    )


def sse_submitted(agent_id: str, submit: Callable[[], Any], **options) -> StreamingHttpResponse:
    """Follow the agent's events, then `submit()` its run and stream it: the caller misses none of the run's events,
    not even a token chunk sent before the response starts. `options`: sse_response's."""
    run, subscription = followed_submit(agent_id, submit)
    return sse_response(run, subscription=subscription, **options)


def followed_submit(agent_id: str, submit: Callable[[], Any]) -> tuple[Any, Subscription | None]:
    """Subscribe to the agent's events, then `submit()` its run: the run and the subscription that holds every event
    it sends (None when the run's agent was named otherwise: a stream then subscribes itself and replays)."""
    try:
        subscription = subscribe_sync(agent_id)
    except (TypeError, ValueError):  # not a name a group can have: submit() answers for the id
        subscription = None
    try:
        run = submit()
    except BaseException:
        if subscription is not None:
            async_to_sync(subscription.close)()
        raise
    if subscription is not None and run.agent_id != agent_id:  # the agent was named otherwise: follow its own group
        async_to_sync(subscription.close)()
        subscription = None
    return run, subscription
