"""Users, their organizations and API tokens (stored as SHA-256 hashes only); the first account and the one-time
setup token it needs on a server others may reach."""

import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, transaction
from django.utils import timezone

from core.errors import Conflict, Forbidden, Invalid, NotFound
from core.models import Agent, ApiToken, ClientSideToken, Membership, Organization
from core.selectors import row_or_none
from tools.services import builtin_tools_ensure

TOKEN_PREFIX = "aide_"
log = logging.getLogger("agents_ide.setup")


@dataclass(frozen=True)
class Principal:
    """Who is asking: a user acting for an organization (the owner of what they touch)."""

    user: User
    org: Organization
    token: ApiToken | None = None
    client: ClientSideToken | None = None  # a client-side access token: only what its policy grants


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def user_create(*, username: str, password: str | None, email: str = "", is_superuser: bool = False) -> User:
    """Create a user and its personal organization (the owner of what the user makes)."""
    user = User.objects.create_user(username=username, password=password, email=email)
    if is_superuser:
        user.is_superuser = user.is_staff = True
        user.save(update_fields=["is_superuser", "is_staff"])
    org = Organization.objects.create(name=f"{username}'s workspace", personal=True)
    Membership.objects.create(user=user, organization=org, role="owner")

    builtin_tools_ensure(owner=org)
    return user


def org_for_user(user: User) -> Organization:
    """The organization a user acts for: their personal one (created if an older user lacks it)."""
    membership = (
        Membership.objects.filter(user=user)
        .select_related("organization")
        .order_by("-organization__personal", "created_at")
        .first()
    )
    if membership:
        return membership.organization
    with transaction.atomic():
        org = Organization.objects.create(name=f"{user.username}'s workspace", personal=True)
        Membership.objects.create(user=user, organization=org, role="owner")
    return org


def api_token_create(
    *, user: User, name: str, org: Organization | None = None, agent_id: str = "", ttl: timedelta | None = None
) -> tuple[ApiToken, str]:
    """Create an API token and return it with its raw value, which is shown once and never stored. Its random part
    never begins as a client-side token's does (about one token in 260,000 would: it was then refused as one)."""
    raw = CLIENT_TOKEN_PREFIX
    while raw.startswith(CLIENT_TOKEN_PREFIX):
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        organization=org or org_for_user(user),
        name=name[:100] or "token",
        prefix=raw[: len(TOKEN_PREFIX) + 6],
        hashed=_hash(raw),
        agent_id=agent_id,
        expires_at=timezone.now() + ttl if ttl else None,
    )
    return token, raw


def api_token_revoke(*, user: User, token_id: str) -> None:
    """Revoke one of the user's tokens; it stops authenticating at once in this process, and in the server's other
    processes within PRINCIPAL_TTL_S."""
    ApiToken.objects.filter(user=user, id=token_id, revoked_at__isnull=True).update(revoked_at=timezone.now())
    _principals_forget(token_id=token_id)  # (a rolled-back revocation only costs a read)


# A token's principal is read once per PRINCIPAL_TTL_S in each process, not on every request: the read (the token
# with its user and organization, compiled by the ORM) was a tenth of the CPU of an agent's send in-process. A
# revocation in this process takes effect at once (`api_token_revoke`); one in another process, or a user made
# inactive, within the TTL. A tool run's token (agent_id set, revoked as its run ends) is never remembered.
PRINCIPAL_TTL_S = 5.0
_PRINCIPALS_MAX = 1000
_principals: dict[str, tuple[float, Principal]] = {}  # token hash -> (monotonic time read, principal)
_principals_lock = threading.Lock()


def _principals_forget(*, token_id: str | None = None) -> None:
    """Drop the remembered principal of token `token_id` (None: all of them)."""
    with _principals_lock:
        if token_id is None:
            _principals.clear()
            return
        for key in [k for k, (_, p) in _principals.items() if p.token is not None and p.token.pk == token_id]:
            del _principals[key]


def principal_from_token(raw: str) -> Principal | None:
    """Resolve a raw bearer token to its principal, or None if unknown, revoked or expired."""
    if not raw or not raw.startswith(TOKEN_PREFIX):
        return None
    if raw.startswith(CLIENT_TOKEN_PREFIX) and (client := _client_principal(raw)) is not None:
        return client  # (an API token made before they were kept apart may begin the same: it is looked up below)
    hashed = _hash(raw)
    remembered = _principals.get(hashed)
    if remembered is not None and time.monotonic() - remembered[0] < PRINCIPAL_TTL_S:
        token = remembered[1].token
        if not (token.expires_at and token.expires_at <= timezone.now()):
            return remembered[1]
    token = row_or_none(ApiToken.objects.select_related("user", "organization").filter(hashed=hashed))
    now = timezone.now()
    if token is None or token.revoked_at or (token.expires_at and token.expires_at <= now) or not token.user.is_active:
        with _principals_lock:
            _principals.pop(hashed, None)
        return None
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    principal = Principal(user=token.user, org=token.organization, token=token)
    if token.agent_id:  # a tool run's token, revoked when its run ends (tools.execution): read on every request
        return principal
    with _principals_lock:
        if len(_principals) >= _PRINCIPALS_MAX:
            _principals.clear()
        _principals[hashed] = (time.monotonic(), principal)
    return principal


# --------------------------------------------------------------------------- client-side access tokens
#
# Letta Cloud's `/v1/client-side-access-tokens` (its SDK's `access_tokens`): a short-lived token a browser front end
# may hold for named agents. What each access grants, as (method, path under /v1 after `agents/{id}`):
CLIENT_TOKEN_PREFIX = TOKEN_PREFIX + "ck_"
CLIENT_TOKEN_TTL = timedelta(minutes=5)  # Letta's default when no expires_at is given
CLIENT_ACCESS = {
    "read_messages": (("GET", re.compile(r"/messages(/.*)?")),),
    "write_messages": (("POST", re.compile(r"/messages(/stream|/async|/cancel)?")),),
    "read_agent": (
        ("GET", re.compile(r"")),
        ("GET", re.compile(r"/(core-memory|context|tools|archival-memory)(/.*)?")),
    ),
    "write_agent": (("PATCH", re.compile(r"")), ("PATCH", re.compile(r"/core-memory/blocks/[^/]+"))),
}
_AGENT_PATH = re.compile(r"^/v1/agents/(?P<agent>agent-[^/]+)(?P<rest>(/.*)?)$")


def _client_principal(raw: str) -> Principal | None:
    token = row_or_none(ClientSideToken.objects.select_related("user", "owner").filter(hashed=_hash(raw)))
    if token is None or token.expires_at <= timezone.now() or not token.user.is_active:
        return None
    return Principal(user=token.user, org=token.owner, client=token)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def client_token_check(*, principal: Principal, method: str, path: str, origin: str | None) -> None:
    """Raise Forbidden unless the client-side token may make this request: from its hostname (when the browser
    names an origin), on an agent its policy names, with an access that grants the method and path."""
    token = principal.client
    if token is None:
        return
    if origin and _origin(origin) != _origin(token.hostname):
        raise Forbidden(f"This access token is for {token.hostname}, not {origin}.")
    match = _AGENT_PATH.match(path.rstrip("/") if path != "/" else path)
    grants = [p for p in token.policy if match and p.get("id") == match["agent"]]
    for grant in grants:
        for access in grant.get("access", []):
            for allowed_method, rest in CLIENT_ACCESS.get(access, ()):
                if method == allowed_method and rest.fullmatch(match["rest"]):
                    return
    raise Forbidden("This client-side access token does not grant this request.")


def client_origin_allowed(origin: str) -> bool:
    """Whether a live client-side token names this origin as its hostname (a browser there may then read our answers:
    CORS; each request is still checked against its own token)."""
    origin = _origin(origin)
    hostnames = ClientSideToken.objects.filter(expires_at__gt=timezone.now(), hostname__istartswith=origin)
    return any(_origin(h) == origin for h in hostnames.values_list("hostname", flat=True)[:50])


def client_token_create(
    *, user: User, org: Organization, hostname: str, policy: list[dict], expires_at=None
) -> tuple[ClientSideToken, str]:
    """A new client-side token for the owner's agents in `policy` (NotFound for an agent not theirs); it expires at
    `expires_at` (in the future) or in 5 minutes. Returns the row and the raw token."""
    if not re.match(r"^https?://[^/\s]+", hostname or ""):
        raise Invalid("hostname must be the full origin of the application, e.g. https://app.example.com.")
    now = timezone.now()
    if expires_at is not None and expires_at <= now:
        raise Invalid("expires_at must be in the future.")
    agent_ids = [p["id"] for p in policy]
    found = set(Agent.objects.filter(owner=org, id__in=agent_ids).values_list("id", flat=True))
    if missing := [i for i in agent_ids if i not in found]:
        raise NotFound(f"Agent '{missing[0]}' not found")
    raw = CLIENT_TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ClientSideToken.objects.create(
        owner=org,
        user=user,
        hashed=_hash(raw),
        token=raw,
        hostname=hostname,
        policy=policy,
        expires_at=expires_at or now + CLIENT_TOKEN_TTL,
    )
    return token, raw


def client_tokens_list(*, org: Organization, agent_id: str | None = None, limit: int = 10, offset: int = 0):
    """A page of the owner's unexpired client-side tokens, newest first (those naming `agent_id`), and whether more
    follow."""
    rows = ClientSideToken.objects.filter(owner=org, expires_at__gt=timezone.now()).order_by("-created_at", "-id")
    if agent_id:
        rows = [t for t in rows if any(p.get("id") == agent_id for p in t.policy)]
    page = list(rows[offset : offset + limit + 1])
    return page[:limit], len(page) > limit


def client_token_delete(*, org: Organization, raw: str) -> None:
    """Revoke the owner's client-side token (NotFound if it is not one)."""
    deleted, _ = ClientSideToken.objects.filter(owner=org, hashed=_hash(raw)).delete()
    if not deleted:
        raise NotFound("Client-side access token not found")


def principal_from_user(user: User) -> Principal:
    return Principal(user=user, org=org_for_user(user))


def first_run_pending() -> bool:
    """True until the first account exists (the IDE then offers to create it; there is no default password)."""
    return not User.objects.exists()


def tokens_for_user(user: User) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user=user, agent_id="").order_by("-created_at"))


# --- the first account ---------------------------------------------------------------------------------------------


def setup_token_required(*, local_address: str = "") -> bool:
    """Whether the first account needs the setup token: others may reach this server, as SETUP_TOKEN_REQUIRED says
    (HOST or PUBLIC_BASE_URL is not loopback) or a request shows by arriving at an address other than loopback."""
    if settings.SETUP_TOKEN_REQUIRED:
        return True
    try:
        return not ipaddress.ip_address(local_address.strip("[]")).is_loopback
    except ValueError:  # not an address (a test client's name, a unix socket): no evidence
        return False


def setup_token_get() -> str:
    """This deployment's one-time setup token: derived from SECRET_KEY, so every process (every replica) prints and
    accepts the same one; it opens the setup once, as the account it creates closes it for good."""
    digest = hmac.new(settings.SECRET_KEY.encode(), b"agents-ide first-account setup token", hashlib.sha256)
    return digest.hexdigest()[:24]  # 96 bits, to copy from a log line


def setup_token_announce(*, local_address: str = "") -> None:
    """On a fresh install others may reach, print the setup token on the console: at server start, and when the setup
    page is asked for (a server bound beyond loopback without saying so learns it from the request). A database not
    migrated yet prints nothing."""
    try:
        if not (setup_token_required(local_address=local_address) and first_run_pending()):
            return
    except DatabaseError:
        return
    log.warning(
        "This server has no account yet and may be reached from other machines: the first account needs this "
        "one-time setup token, asked for at %s/setup/ : %s",
        settings.PUBLIC_BASE_URL.rstrip("/"),
        setup_token_get(),
    )


def first_account_create(
    *, username: str, password: str, email: str = "", setup_token: str = "", local_address: str = ""
) -> User:
    """Create the first account, which administers the server; where the setup token is required, only with it (the
    account closes the setup, so the token works once). Invalid for a missing or wrong token, Conflict once an account
    exists."""
    if not first_run_pending():
        raise Conflict("This server has an account already: sign in.")
    if setup_token_required(local_address=local_address) and not hmac.compare_digest(
        setup_token.strip().encode(), setup_token_get().encode()
    ):
        raise Invalid("That is not the setup token: the server printed it on its console (its log) when it started.")
    return user_create(username=username, password=password, email=email, is_superuser=True)
