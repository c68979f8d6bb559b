"""REST endpoints for client-side access tokens (Letta Cloud's `/v1/client-side-access-tokens`, its SDK's
`access_tokens`; Letta's open-source server has no such router, so the shapes are the SDK's: letta_client/types/
access_token_*.py): a scoped, expiring token for named agents that a browser front end may hold. Thin: parse, call,
present; what a token may do is checked where it authenticates (core.accounts.client_token_check)."""

from datetime import datetime
from typing import Literal

from ninja import Field, Query, Router, Schema

from core.accounts import client_token_create, client_token_delete, client_tokens_list
from core.api.common import owner
from core.models import ClientSideToken

router = Router(tags=["client-side-access-tokens"])

Access = Literal["read_messages", "write_messages", "read_agent", "write_agent"]


class PolicyItem(Schema):
    id: str = Field(min_length=1, max_length=64, description="The agent's id.")
    access: list[Access] = Field(min_length=1)
    type: Literal["agent"] = "agent"


class AccessTokenIn(Schema):
    hostname: str = Field(max_length=2000, description="The application's origin, e.g. https://app.example.com.")
    policy: list[PolicyItem] = Field(min_length=1, max_length=100)
    expires_at: datetime | None = Field(None, description="When it expires (default: in 5 minutes).")


class PolicyOut(Schema):
    data: list[PolicyItem]
    version: Literal["1"] = "1"


class AccessTokenOut(Schema):
    token: str
    expires_at: datetime = Field(alias="expiresAt")
    hostname: str
    policy: PolicyOut


class AccessTokenListOut(Schema):
    tokens: list[AccessTokenOut]
    has_next_page: bool = Field(alias="hasNextPage")


class AccessTokenListQuery(Schema):
    agent_id: str | None = Field(None, alias="agentId", description="Only tokens naming this agent.")
    limit: int = Field(10, ge=1, le=100)
    offset: int = Field(0, ge=0)


class DeletedTokenOut(Schema):
    deleted: bool = True


def _out(token: ClientSideToken) -> dict:
    return {
        "token": token.token,
        "expiresAt": token.expires_at,
        "hostname": token.hostname,
        "policy": {"data": token.policy},
    }


@router.post("/client-side-access-tokens", response=AccessTokenOut, by_alias=True)
def access_token_create(request, body: AccessTokenIn):
    """A token for the caller's agents in `policy`, usable only from `hostname` and until `expires_at`."""
    principal = request.principal
    token, _ = client_token_create(
        user=principal.user,
        org=principal.org,
        hostname=body.hostname,
        policy=[p.dict() for p in body.policy],
        expires_at=body.expires_at,
    )
    return _out(token)


@router.get("/client-side-access-tokens", response=AccessTokenListOut, by_alias=True)
def access_tokens_list(request, q: Query[AccessTokenListQuery]):
    tokens, more = client_tokens_list(org=owner(request), agent_id=q.agent_id, limit=q.limit, offset=q.offset)
    return {"tokens": [_out(t) for t in tokens], "hasNextPage": more}


@router.delete("/client-side-access-tokens/{token}", response=DeletedTokenOut)
def access_token_delete(request, token: str):
    """Revoke the token: it stops authenticating at once."""
    client_token_delete(org=owner(request), raw=token)
    return {"deleted": True}
