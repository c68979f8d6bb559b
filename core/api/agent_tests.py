"""REST endpoints for agent regression tests (core.agents.agent_tests). Thin: parse, call a service, present."""

from ninja import Field, Router, Schema

from core.agents import agent_tests
from core.api.common import owner
from core.api.schemas import DeletedOut, TestOut, TestRunOut
from core.evals import agent_tests as test_runs
from core.providers import model_resolve
from core.selectors import agent_get

router = Router(tags=["agent tests"])


class TestStart(Schema):
    step_id: str | None = Field(None, description="fork at this step instead of starting from the agent as it is")
    before: bool = Field(False, description="with step_id: the state the step saw, not the one after it")


class TestIn(Schema):
    id: str | None = Field(None, max_length=64, description="replace the test with this id")
    name: str = Field(..., min_length=1, max_length=200)
    turns: list[str] = Field(..., min_length=1, max_length=agent_tests.MAX_TURNS, description="user messages, in order")
    expect: dict = Field(
        ...,
        description="tools {calls, order}, reply {contains|matches|equals}, blocks [{label, "
        "contains|matches|equals}], archival {matches}, stop_reason, max_steps, "
        "max_prompt_tokens_per_step, max_cost_usd",
    )
    start: TestStart | None = None


class TestsRunIn(Schema):
    test_ids: list[str] | None = None
    model: str | None = Field(None, max_length=200, description="run on this model instead of the agent's")
    keep: bool = Field(False, description="keep each test's copy of the agent for inspection")


@router.get("/agents/{agent_id}/tests", response=list[TestOut], exclude_unset=True)
def tests_list(request, agent_id: str):
    return agent_tests.tests_list(agent=agent_get(owner=owner(request), agent_id=agent_id))


@router.post("/agents/{agent_id}/tests", response=TestOut)
def test_save(request, agent_id: str, body: TestIn):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return agent_tests.test_save(agent=agent, test=body.dict())


@router.post("/agents/{agent_id}/tests/run", response=TestRunOut, exclude_unset=True)
def tests_run(request, agent_id: str, body: TestsRunIn | None = None):
    """Run the agent's tests (all, or the ids given) in the background; poll the results by the returned id."""
    body = body or TestsRunIn()
    org = owner(request)
    agent = agent_get(owner=org, agent_id=agent_id)
    if body.model:
        model_resolve(owner=org, handle=body.model)
    run = test_runs.tests_start(owner=org, agent=agent, test_ids=body.test_ids, model=body.model, keep=body.keep)
    return agent_tests.test_run_out(run)


@router.get("/agents/{agent_id}/tests/results/{run_id}", response=TestRunOut, exclude_unset=True)
def tests_results(request, agent_id: str, run_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return agent_tests.test_run_out(agent_tests.test_run_get(agent=agent, run_id=run_id))


# After /tests/run and /tests/results/…: the path patterns are tried in order.
@router.delete("/agents/{agent_id}/tests/{test_id}", response=DeletedOut)
def test_delete(request, agent_id: str, test_id: str):
    agent_tests.test_delete(agent=agent_get(owner=owner(request), agent_id=agent_id), test_id=test_id)
    return {"deleted": test_id}
