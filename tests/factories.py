"""Test data made through the real write functions (services), never raw model saves."""

import json
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.test import Client

from core.accounts import api_token_create, org_for_user, user_create
from core.models import Agent, Organization


@dataclass
class Account:
    user: User
    org: Organization
    token: str


def make_account(username: str, password: str | None = "correct horse battery staple") -> Account:
    user = user_create(username=username, password=password)
    _, raw = api_token_create(user=user, name="test")
    return Account(user=user, org=org_for_user(user), token=raw)


def make_agent(owner: Organization, *, name: str = "agent", model: str = "openai/fake-model", **kwargs) -> Agent:
    from core.agents.services import BlockInput, agent_create

    blocks = kwargs.pop("memory_blocks", None)
    if blocks is None:
        blocks = [
            BlockInput(label="persona", value="I am a helpful test agent."),
            BlockInput(label="human", value="The user's name is Alice."),
        ]
    kwargs.setdefault("context_window_limit", 16000)
    return agent_create(owner=owner, name=name, model=model, memory_blocks=blocks, **kwargs)


class ApiClient:
    """JSON calls against /v1 with a bearer token."""

    def __init__(self, token: str):
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def _call(self, method: str, path: str, body=None, **extra):
        fn = getattr(self.client, method)
        if body is None:
            return fn(path, **extra)
        return fn(path, data=json.dumps(body), content_type="application/json", **extra)

    def get(self, path, **extra):
        return self.client.get(path, **extra)

    def post(self, path, body=None, **extra):
        return self._call("post", path, body if body is not None else {}, **extra)

    def patch(self, path, body=None, **extra):
        return self._call("patch", path, body if body is not None else {}, **extra)

    def put(self, path, body=None, **extra):
        return self._call("put", path, body if body is not None else {}, **extra)

    def delete(self, path, **extra):
        return self.client.delete(path, **extra)
