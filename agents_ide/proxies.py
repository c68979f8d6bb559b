"""Behind a reverse proxy: the client's real address, believed only from the proxies the operator trusts.

daphne gives every request its direct peer's address; behind a proxy that is the proxy's, shared by every client, so
a lockout by address would lock everyone out. daphne's own `--proxy-headers` believes X-Forwarded-For from any peer
and takes its leftmost entry, which any client can write. This ASGI middleware believes the header only when the
direct peer is in `TRUSTED_PROXIES`, and then takes the rightmost address no trusted proxy owns: each trusted hop
appends the address it was reached from, so everything left of the first untrusted hop was written by the client.
"""

from __future__ import annotations

import functools
import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    """TRUSTED_PROXIES' addresses and CIDRs as networks (a malformed entry trusts nothing)."""
    found = []
    for entry in entries:
        try:
            found.append(ipaddress.ip_network(entry.strip().strip("[]"), strict=False))
        except ValueError:
            continue
    return tuple(found)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return address.ipv4_mapped or address if isinstance(address, ipaddress.IPv6Address) else address


def _trusted(address, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address in network for network in networks)


def client_address(peer: str, forwarded_for: list[str], trusted: tuple[Network, ...]) -> str:
    """The client's address: `peer` unless it is a trusted proxy; then the rightmost X-Forwarded-For entry that is
    not a trusted proxy (all trusted: the leftmost; an entry that is no address stops the walk at the hop before)."""
    if not trusted or not forwarded_for or not _trusted(_address(peer), trusted):
        return peer
    hops = [hop for header in forwarded_for for hop in header.split(",") if hop.strip()]
    client = peer
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            break
        client = str(address)
        if not _trusted(address, trusted):
            break
    return client


class TrustedProxyHeaders:
    """ASGI middleware: an HTTP or websocket connection from a trusted proxy gets the forwarded client address as
    its `client` (Django's REMOTE_ADDR, the login lockout's and the throttles' key); any other keeps its peer's."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            from django.conf import settings  # read per connection: tests change it

            trusted = _networks(tuple(settings.TRUSTED_PROXIES))
            if trusted:
                peer, port = scope["client"][0], scope["client"][1]
                forwarded = [
                    v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"x-forwarded-for"
                ]
                client = client_address(peer, forwarded, trusted)
                if client != peer:
                    scope = {**scope, "client": (client, port)}
        return await self.app(scope, receive, send)
