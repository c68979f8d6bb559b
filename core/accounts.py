"""Users, their organizations and API tokens. Tokens are stored as SHA-256 hashes only."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from core.models import ApiToken, Membership, Organization
from core.selectors import row_or_none
from tools.services import builtin_tools_ensure

TOKEN_PREFIX = "aide_"


@dataclass(frozen=True)
class Principal:
    """Who is asking: a user acting for an organization (the owner of what they touch)."""

    user: User
    org: Organization
    token: ApiToken | None = None


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
    """Create an API token and return it with its raw value, which is shown once and never stored."""
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
    """Revoke one of the user's tokens; it stops authenticating at once."""
    ApiToken.objects.filter(user=user, id=token_id, revoked_at__isnull=True).update(revoked_at=timezone.now())


def principal_from_token(raw: str) -> Principal | None:
    """Resolve a raw bearer token to its principal, or None if unknown, revoked or expired."""
    if not raw or not raw.startswith(TOKEN_PREFIX):
        return None
    token = row_or_none(ApiToken.objects.select_related("user", "organization").filter(hashed=_hash(raw)))
    now = timezone.now()
    if token is None or token.revoked_at or (token.expires_at and token.expires_at <= now) or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return Principal(user=token.user, org=token.organization, token=token)


def principal_from_user(user: User) -> Principal:
    return Principal(user=user, org=org_for_user(user))


def first_run_pending() -> bool:
    """True until the first account exists (the IDE then offers to create it; there is no default password)."""
    return not User.objects.exists()


def tokens_for_user(user: User) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user=user, agent_id="").order_by("-created_at"))
