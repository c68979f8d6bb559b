"""Login throttling: failed logins are counted per (account, client address) pair and per client address in
Django's cache; past the limit (LOGIN_FAILURES_PER_ACCOUNT for a pair, LOGIN_FAILURES_PER_ADDRESS for an address,
within LOGIN_LOCKOUT_S) the attempt is refused before the password is hashed, so guessing costs the server nothing.
A successful login clears its pair's count.

No count is per account alone (django-axes' "combination" of username and address): a wrong-password storm from
one address would otherwise lock the account's owner out from everywhere, turning the throttle into a way to
deny someone service. Guessing one account from many addresses is bounded by each address's own limits.

Every password login goes through `ThrottledModelBackend` (the IDE's login page, the admin's), so no path skips it.
"""

import hashlib

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver


class LoginThrottled(PermissionDenied):
    def __init__(self, retry_after: int):
        super().__init__(f"Too many failed logins; try again in {max(1, retry_after // 60)} minute(s).")
        self.retry_after = retry_after


def _key(kind: str, *parts: str) -> str:
    # NUL cannot occur in an address and separates the parts so ("ab", "c") and ("a", "bc") differ.
    value = "\0".join(part.strip().lower() for part in parts)
    return f"login-fail:{kind}:" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:32]


def client_address(request) -> str:
    """The client's address (REMOTE_ADDR: behind a proxy in TRUSTED_PROXIES, the forwarded one; agents_ide/proxies.py)."""
    return (request.META.get("REMOTE_ADDR") or "unknown") if request is not None else "unknown"


def _keys(request, username: str | None) -> list[tuple[str, int]]:
    address = client_address(request)
    keys = [(_key("addr", address), settings.LOGIN_FAILURES_PER_ADDRESS)]
    if username:
        keys.append((_key("user-addr", username, address), settings.LOGIN_FAILURES_PER_ACCOUNT))
    return keys


def login_blocked_for(request, username: str | None) -> int:
    """Seconds until this address, or this account from this address, may try again (0: not blocked)."""
    counts = cache.get_many([k for k, _ in _keys(request, username)])
    if any(counts.get(k, 0) >= limit for k, limit in _keys(request, username)):
        return settings.LOGIN_LOCKOUT_S
    return 0


def login_failure_record(request, username: str | None) -> None:
    """Count one failed login against the address and the (account, address) pair (each count lapses
    LOGIN_LOCKOUT_S after the last failure); writes the cache."""
    for key, _ in _keys(request, username):
        cache.add(key, 0, settings.LOGIN_LOCKOUT_S)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, settings.LOGIN_LOCKOUT_S)
        cache.touch(key, settings.LOGIN_LOCKOUT_S)


def login_success_record(request, username: str) -> None:
    """Clear the (account, address) pair's failure count; writes the cache. The address keeps its count: one
    login must not unlock guessing other accounts."""
    cache.delete(_key("user-addr", username, client_address(request)))


class ThrottledModelBackend(ModelBackend):
    """Django's model backend, refusing (before any hashing) while the address or the (account, address) pair is
    throttled."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get("username")
        if blocked := login_blocked_for(request, username):
            raise LoginThrottled(blocked)
        return super().authenticate(request, username=username, password=password, **kwargs)


@receiver(user_login_failed)
def _on_login_failed(sender, credentials, request=None, **kwargs):
    login_failure_record(request, credentials.get("username"))


@receiver(user_logged_in)
def _on_logged_in(sender, request, user, **kwargs):
    login_success_record(request, user.get_username())
