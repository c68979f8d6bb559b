"""Live answers against the OpenAPI document: each response's JSON validates against the schema the document
declares for its path, method and status, and every operation declares the body of its success."""

import io
import json
import re

import pytest
from django.conf import settings
from jsonschema import Draft202012Validator

from tests.factories import ApiClient
from tests.fake_llm import FakeLLM
from tests.helpers import until

# Runs execute on the run pool's own threads and connections: the data they read must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

MCP_DEMO = settings.MCP_DEMO_SERVER  # in a directory approved for MCP servers (tests/settings.py)


class CheckedClient:
    """An ApiClient whose every JSON answer is validated against the document."""

    def __init__(self, token: str):
        self.api = ApiClient(token)
        self.document = self.api.get("/v1/openapi.json").json()
        self.routes = sorted(
            (
                (
                    template.count("{"),
                    re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)) + "$"),
                    template,
                )
                for template in self.document["paths"]
            ),
            key=lambda r: r[0],
        )

    def operation(self, method: str, path: str) -> tuple[str, dict]:
        """The path template and operation that serve this request (fixed segments win over parameters)."""
        path = path.split("?", 1)[0]
        for _, pattern, template in self.routes:
            if pattern.match(path) and method in self.document["paths"][template]:
                return template, self.document["paths"][template][method]
        raise AssertionError(f"{method.upper()} {path} is not in the OpenAPI document")

    def check(self, method: str, path: str, response, status: int):
        assert response.status_code == status, (method, path, response.status_code, response.content[:500])
        template, operation = self.operation(method, path)
        declared = operation["responses"].get(str(status))
        assert declared is not None, f"{method.upper()} {template} answered {status}, which it does not declare"
        schema = declared["content"]["application/json"]["schema"]
        body = response.json()
        errors = sorted(
            Draft202012Validator({**schema, "components": self.document["components"]}).iter_errors(body),
            key=lambda e: list(e.absolute_path),
        )
        assert not errors, f"{method.upper()} {template} {status}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:5]
        )
        return body

    def get(self, path, status=200):
        return self.check("get", path, self.api.get(path), status)

    def post(self, path, body=None, status=200):
        return self.check("post", path, self.api.post(path, body), status)

    def put(self, path, body=None, status=200):
        return self.check("put", path, self.api.put(path, body), status)

    def patch(self, path, body=None, status=200):
        return self.check("patch", path, self.api.patch(path, body), status)

    def delete(self, path, status=200):
        return self.check("delete", path, self.api.delete(path), status)

    def upload(self, path, data: bytes, status=200):
        upload = io.BytesIO(data)
        upload.name = "agent.af"
        return self.check("post", path, self.api.client.post(path, {"file": upload}), status)


@pytest.fixture
def client(account, fake_llm):
    return CheckedClient(account.token)


TOOL_SOURCE = '''
def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: what to say
    """
    return text.upper()
'''


def test_agents_memory_and_tools_answer_as_documented(client):
    c = client
    agent = c.post(
        "/v1/agents/",
        {
            "name": "typed",
            "model": "openai/fake-model",
            "memory_blocks": [{"label": "human", "value": "Alice"}, {"label": "persona", "value": "helpful"}],
            "embedding_config": {"embedding_model": "text-embedding-3-small", "embedding_dim": 1536},
            "tags": ["t"],
            "secrets": {"API_KEY": "x"},
        },
        status=201,
    )
    a = f"/v1/agents/{agent['id']}"
    assert agent["embedding_config"]["embedding_dim"] == 1536  # open Letta config keys survive the schema
    c.get("/v1/agents/")
    c.get(a)
    c.patch(a, {"description": "typed responses", "version_message": "describe"})
    c.get(f"{a}/context")
    c.get("/v1/models/")
    c.get("/v1/models/embedding")
    c.get("/v1/health/")

    blocks = c.get(f"{a}/core-memory/blocks")
    c.get(f"{a}/core-memory/blocks/human")
    c.patch(f"{a}/core-memory/blocks/human", {"value": "Alice, likes cats"})
    shared = c.post("/v1/blocks/", {"label": "team", "value": "we"}, status=201)
    b = f"/v1/blocks/{shared['id']}"
    c.get("/v1/blocks/")
    c.patch(b, {"value": "we, us"})
    c.get(b)
    c.patch(f"{a}/core-memory/blocks/attach/{shared['id']}")
    c.get(f"{b}/agents")
    c.get(f"{b}/history")
    c.post(f"{b}/restore/1")
    c.patch(f"{a}/core-memory/blocks/detach/{shared['id']}")
    c.delete(b)
    assert blocks

    passage = c.post(f"{a}/archival-memory", {"text": "cats purr", "tags": ["cats"]})[0]
    c.get(f"{a}/archival-memory")
    c.get(f"{a}/archival-memory/search?query=cats")
    c.get(f"{a}/archival-memory/status")
    c.get(f"{a}/recall-memory/search?query=hi")
    c.delete(f"{a}/archival-memory/{passage['id']}")

    tool = c.post("/v1/tools/", {"source_code": TOOL_SOURCE, "tags": ["x"]}, status=201)
    t = f"/v1/tools/{tool['id']}"
    c.get("/v1/tools/")
    c.get(t)
    c.patch(t, {"description": "Louder."})
    c.put("/v1/tools/", {"source_code": TOOL_SOURCE})
    c.post("/v1/tools/generate-schema", {"source_code": TOOL_SOURCE})
    c.post("/v1/tools/run", {"source_code": TOOL_SOURCE, "args": {"text": "hi"}})
    c.get(f"{t}/runs")
    c.patch(f"{a}/tools/attach/{tool['id']}")
    c.get(f"{a}/tools")
    c.post(f"{a}/tools/shout/run", {"args": {"text": "hi"}})
    c.post(f"{a}/tools/core_memory_append/run", {"args": {"label": "human", "content": "and dogs"}})
    c.patch(f"{a}/tools/detach/{tool['id']}")
    c.delete(t)

    versions = c.get(f"{a}/versions")
    c.get(f"{a}/versions/{versions[-1]['number']}")
    c.get(f"{a}/versions/{versions[0]['number']}/diff")
    c.post(f"{a}/versions/1/restore", {"message": "back"})

    c.get(f"{a}/sleeptime")
    c.patch(f"{a}/sleeptime", {"enabled": True, "frequency": 3})
    c.get(f"{a}/sleeptime")

    exported = c.get(f"{a}/export?include_history=true")
    data = json.dumps(exported).encode()
    c.upload("/v1/agents/import/preview", data)
    imported = c.upload("/v1/agents/import", data)
    c.delete(f"/v1/agents/{imported['agent_ids'][0]}")


def test_messages_runs_steps_and_time_travel_answer_as_documented(client, fake_llm):
    c = client
    agent = c.post("/v1/agents/", {"name": "talker", "model": "openai/fake-model"}, status=201)
    a = f"/v1/agents/{agent['id']}"
    fake_llm.script(
        FakeLLM.reasoning("Let me note that.", "core_memory_append", {"label": "human", "content": "likes tea"}),
        FakeLLM.tool("send_message", {"message": "Noted!"}),
    )
    reply = c.post(f"{a}/messages", {"messages": [{"role": "user", "content": "I like tea"}]})
    types = {m["message_type"] for m in reply["messages"]}
    assert {"reasoning_message", "tool_call_message", "tool_return_message", "assistant_message"} <= types
    assert not any("kind" in m for m in reply["messages"])  # optional keys stay absent, not null
    c.post(f"{a}/messages", {"input": "and coffee", "use_assistant_message": False})
    c.get(f"{a}/messages")
    c.get(f"{a}/messages?use_assistant_message=false")
    c.get(f"{a}/recall-memory/search?query=tea")
    c.get(f"{a}/context")

    run_id = reply["run_id"]
    c.get("/v1/runs/")
    c.get(f"/v1/runs/{run_id}")
    c.get(f"/v1/runs/{run_id}/messages")
    c.get(f"/v1/runs/{run_id}/usage")
    steps = c.get(f"/v1/runs/{run_id}/steps")
    step = f"/v1/steps/{steps[0]['id']}"
    c.get(step)
    c.post(f"{step}/replay", {"temperature": 0.5})
    c.get(f"{step}/replays")
    fork = c.post(f"{a}/fork", {"step_id": steps[0]["id"], "before": True})
    c.get(f"{a}/usage")

    queued = c.post(f"{a}/messages/async", {"input": "later"})
    until(lambda: c.get(f"/v1/runs/{queued['id']}")["status"] in ("completed", "failed"), what="the async run")
    c.post(f"{a}/messages/cancel", {})

    test = c.post(f"{a}/tests", {"name": "replies", "turns": ["hi"], "expect": {"stop_reason": "end_turn"}})
    c.get(f"{a}/tests")
    started = c.post(f"{a}/tests/run", {})
    results = f"{a}/tests/results/{started['id']}"
    until(lambda: c.get(results)["status"] in ("passed", "failed"), what="the agent tests")
    c.delete(f"{a}/tests/{test['id']}")

    c.patch(f"{a}/sleeptime", {"enabled": True})
    c.post(f"{a}/sleeptime/run", status=202)

    c.patch(f"{a}/reset-messages")
    c.delete(f"/v1/agents/{fork['id']}")


def test_mcp_servers_answer_as_documented(client, settings):
    settings.EGRESS_ALLOW = ["127.0.0.1"]  # the remote server below is on loopback
    c = client
    config = {"mcp_server_type": "stdio", "command": settings.MCP_DEMO_PYTHON, "args": [MCP_DEMO, "stdio"]}
    server = c.post("/v1/mcp-servers/", {"server_name": "demo", "config": config})
    s = f"/v1/mcp-servers/{server['id']}"
    assert "server_url" not in server  # a stdio server's shape has no HTTP fields
    c.get("/v1/mcp-servers/")
    c.get(s)
    c.patch(s, {"server_name": "demo2"})
    c.patch(f"{s}/refresh")
    tools = c.get(f"{s}/tools")
    add = next(t for t in tools if t["name"] == "add")
    c.get(f"{s}/tools/{add['id']}")
    c.post(f"{s}/tools/{add['id']}/run", {"args": {"a": 1, "b": 2}})
    remote = c.post("/v1/mcp-servers/", {"server_name": "remote", "config": {"server_url": "http://127.0.0.1:9/mcp"}})
    assert remote["auth_token"] is None and "command" not in remote
    assert c.api.delete(s).status_code == 204


def test_errors_answer_with_the_documented_error_body(client, account):
    c = client
    agent = c.post("/v1/agents/", {"name": "erring", "model": "openai/fake-model"}, status=201)
    a = f"/v1/agents/{agent['id']}"
    c.get("/v1/agents/agent-missing", status=404)
    c.get(f"{a}/core-memory/blocks/nothing", status=404)
    c.get("/v1/runs/run-missing", status=404)
    c.get("/v1/steps/step-missing", status=404)
    c.get(f"{a}/versions/99", status=404)
    c.patch(f"{a}/core-memory/blocks/attach/block-missing", status=404)
    c.post("/v1/tools/", {"source_code": TOOL_SOURCE}, status=201)
    c.post("/v1/tools/", {"source_code": TOOL_SOURCE}, status=409)
    c.post("/v1/agents/", {"name": ""}, status=422)
    c.patch(f"{a}/core-memory/blocks/human", {"limit": 0}, status=422)
    c.post("/v1/blocks/", {"label": "bad label!"}, status=422)
    builtin = next(t for t in c.get("/v1/tools/") if t["tool_type"] == "letta_core")
    c.patch(f"/v1/tools/{builtin['id']}", {"description": "mine now"}, status=403)
    c.check("post", "/v1/agents/", c.api.client.post("/v1/agents/", "{", content_type="application/json"), 400)
    c.check("get", "/v1/agents/", ApiClient("not-a-token").get("/v1/agents/"), 401)


def _described(schema: dict, components: dict) -> bool:
    """Whether a response schema says what the body holds (not a bare object)."""
    if "$ref" in schema:
        return _described(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    if (
        schema.get("properties")
        or schema.get("anyOf")
        or schema.get("oneOf")
        or schema.get("type") in ("string", "integer", "null")
    ):
        return True
    if schema.get("type") == "array":
        return _described(schema.get("items") or {}, components)
    extra = schema.get("additionalProperties")
    return isinstance(extra, dict) and bool(extra)


def test_every_operation_declares_its_success_body(client):
    components = client.document["components"]["schemas"]
    missing = []
    for template, item in client.document["paths"].items():
        for method, operation in item.items():
            success = sorted(int(code) for code in operation["responses"] if code.startswith("2"))
            assert success, f"{method.upper()} {template} declares no success response"
            if success[0] == 204:  # no body
                continue
            content = operation["responses"][str(success[0])].get("content") or {}
            if not content or not all(_described(body.get("schema") or {}, components) for body in content.values()):
                missing.append(f"{method.upper()} {template}")
    assert not missing, f"operations whose success body is not described: {missing}"
