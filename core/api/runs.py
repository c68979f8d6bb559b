"""REST endpoints for background runs (Letta v1 paths): start one, read its usage. Thin: parse, call, present."""

from channels.db import database_sync_to_async
from ninja import Router

from core.agents import history
from core.api.agents import owner
from core.api.messages import LettaRequest, _inputs, run_out
from core.api.schemas import RunOut, RunUsageOut
from core.providers import model_resolve
from core.runs import executor, runner
from core.selectors import agent_get

router = Router(tags=["runs"])


def _start(org, agent_id: str, body: LettaRequest) -> dict:
    agent = agent_get(owner=org, agent_id=agent_id)
    inputs = runner.input_normalize(_inputs(body))
    model_resolve(owner=agent.owner, handle=agent.model)
    run = executor.run_submit(
        owner=agent.owner, agent_id=agent.id, input_messages=inputs, max_steps=body.max_steps, background=True
    )
    return run_out(run)


@router.post("/agents/{agent_id}/messages/async", response=RunOut, tags=["messages"])
async def messages_send_async(request, agent_id: str, body: LettaRequest):
    """Queue a run and return it at once (status created); 409 if the agent is busy."""
    # Not thread-sensitive: Django would otherwise run every sync view of the process on one thread, so
    # concurrent sends would queue behind each other's database waits. Django tidies only that thread's database
    # connection; database_sync_to_async tidies this one's (a pooled one goes back to the pool).
    return await database_sync_to_async(_start, thread_sensitive=False)(owner(request), agent_id, body)


@router.get("/runs/{run_id}/usage", response=RunUsageOut)
def run_usage(request, run_id: str):
    usage = history.run_get(owner=owner(request), run_id=run_id).usage or {}
    return {
        "completion_tokens": usage.get("completion_tokens", 0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "step_count": usage.get("step_count", 0),
    }
