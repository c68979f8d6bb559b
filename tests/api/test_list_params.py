"""Plain API checks of list parameters: unsupported sorts answer 422 with a message, unknown cursors 404 JSON."""

import pytest

from tests.factories import make_agent


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="params")


def test_unsupported_sorts_are_422_with_a_message(api, agent):
    wrong = api.get("/v1/agents/?order_by=name")
    assert wrong.status_code == 422 and "order_by" in str(wrong.json()["errors"])
    legacy = api.get("/v1/agents/?sort_by=name")
    assert legacy.status_code == 422 and "order_by must be one of" in legacy.json()["detail"]
    assert api.get("/v1/agents/?sort_by=updated_at").json()[0]["id"] == agent.id
    bad_order = api.get(f"/v1/agents/{agent.id}/messages?order=sideways")
    assert bad_order.status_code == 422 and "order" in str(bad_order.json()["errors"])
    for path in (f"/v1/agents/{agent.id}/messages", "/v1/tools/", "/v1/blocks/", "/v1/runs/"):
        answer = api.get(f"{path}?order_by=name")
        assert answer.status_code == 422, path


def test_unknown_cursor_is_a_json_404_naming_it(api, agent):
    answer = api.get(f"/v1/agents/{agent.id}/messages?after=message-nope")
    assert answer.status_code == 404 and answer["Content-Type"].startswith("application/json")
    assert answer.json()["detail"].startswith("The `after` cursor 'message-nope'")
    oldest = api.get(f"/v1/agents/{agent.id}/messages?order=desc").json()[-1]["id"]
    assert api.get(f"/v1/agents/{agent.id}/messages?after={oldest}").json() == []  # past the end: []


def test_every_paged_list_takes_the_same_paging_parameters_with_its_own_defaults():
    """Every list endpoint's query extends one paging schema (core.api.common.PageQuery): a list that pages by cursor
    offers before, after, limit, order and order_by, each optional; the defaults are each route's Letta ones."""
    from agents_ide.api import api

    paging = {"before", "after", "limit", "order", "order_by"}
    defaults = {}
    for path, operations in api.get_openapi_schema()["paths"].items():
        params = {p["name"]: p for p in operations.get("get", {}).get("parameters", []) if p["in"] == "query"}
        if "after" not in params:
            continue
        assert paging <= set(params), (path, paging - set(params))
        assert not any(params[name].get("required") for name in paging), path
        defaults[path] = (params["limit"]["schema"].get("default"), params["order"]["schema"].get("default"))
    assert len(defaults) >= 20  # every cursor-paged list is here
    assert defaults["/v1/agents/"] == (50, "desc")
    assert defaults["/v1/agents/{agent_id}/messages"] == (100, "desc")
    assert defaults["/v1/runs/{run_id}/messages"] == (None, "asc")
    assert defaults["/v1/tags/"] == (50, "asc")
    assert defaults["/v1/folders/{folder_id}/files"] == (1000, "desc")
    assert defaults["/v1/agents/{agent_id}/core-memory/blocks"] == (None, "asc")
