"""The egress guard: every connection the server makes on a user's behalf reaches the public internet only.

A user names URLs (an MCP server, a provider's base URL, a page for `fetch_webpage`) and tools with network go
out through the sandbox's egress proxy; none of it may turn inward. Each connection is checked here: the host is
resolved once, every address that is loopback, private, link-local (169.254.0.0/16, cloud metadata included),
unique-local, shared, reserved, multicast or one of this host's own is refused (so is an IPv6 address that carries
such an IPv4 address: NAT64, 6to4, Teredo, IPv4-compatible, -mapped, -translated), and the connection is made to an
address that was checked — never to a name resolved again later, so a DNS answer cannot change in between
(rebinding). Redirects are connections too: each hop comes through here.

The operator decides the exceptions (core/egress_rules.py): `EGRESS_ALLOW` lists internal hosts, addresses or
networks (optionally with a port); the deployment's model endpoints are allowed at their model API's paths only, and
`PUBLIC_BASE_URL` to the sandbox's proxy only. An HTTP request made for a user never reaches this server itself.

Refusal happens before any connection is attempted; `EgressRefused` says which address and why.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import threading
import time
from dataclasses import replace
from urllib.parse import urlsplit

# Allowance, parse_allowance and allowances are the guard's vocabulary: its callers import them from here.
from core.egress_rules import DEFAULT_PORTS, Allowance, IPAddress, allowances, parse_allowance, unmapped  # noqa: F401

_OWN_ADDRESSES_TTL_S = 30.0


class EgressRefused(Exception):
    """The destination is not on the public internet and the operator did not allow it."""


class Unresolvable(EgressRefused):
    """The destination's name does not resolve (now): nothing could be checked, nothing was connected to."""


def own_server_reason(host: str, address: IPAddress, port: int) -> str | None:
    """Why an HTTP request would reach this server itself (its PUBLIC_BASE_URL, or the port it listens on at one of
    this host's addresses); None when it would not. Its pages and admin are never fetched on a user's behalf."""
    from django.conf import settings

    public = urlsplit(settings.PUBLIC_BASE_URL)
    if (public.hostname or "").lower().rstrip(".") == host and (
        public.port or DEFAULT_PORTS.get(public.scheme)
    ) == port:
        return "this server's own address (PUBLIC_BASE_URL)"
    if port != int(os.environ.get("PORT") or 8000):
        return None
    address = unmapped(address)
    bound = os.environ.get("HOST", "").strip("[]")
    if address.is_loopback or address.is_unspecified or address in own_addresses() or str(address) == bound:
        return "this server's own address (the port it listens on)"
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why an address is not on the public internet (None: it is). An IPv6 address that carries an IPv4 one (NAT64,
    6to4, Teredo, the IPv4-compatible, -mapped and -translated forms) is refused when the IPv4 inside is."""
    if isinstance(address, ipaddress.IPv6Address):
        for form, inner in embedded_ipv4(address):
            if (reason := _reason(inner)) is not None:
                return f"{reason} ({inner} inside {form})"
        if address.ipv4_mapped is not None:
            return None  # nothing but the IPv4 address it maps, judged above
    return _reason(address)


def _reason(address: IPAddress) -> str | None:
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv6Address) and address in _UNIQUE_LOCAL:
        return "a unique-local address"
    if address.is_private or not address.is_global:
        return "a private or reserved address"
    if address in own_addresses():
        return "one of this host's own addresses"
    return None


_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052
_NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # RFC 4291 (deprecated, still routed by some stacks)
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)
# Where RFC 6052 puts the IPv4 address for each prefix length a NAT64 may use (bits 64-71 are always zero).
_RFC6052_OCTETS = {48: (6, 7, 9, 10), 56: (7, 9, 10, 11), 64: (9, 10, 11, 12), 96: (12, 13, 14, 15)}


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the name of the form that carries it: a connection
    to it reaches that IPv4 address through a translator or tunnel (or, on some stacks, directly)."""
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    packed = address.packed
    if address.ipv4_mapped is not None:
        found.append(("an IPv4-mapped address", address.ipv4_mapped))
    if address in _IPV4_TRANSLATED:
        found.append(("an IPv4-translated address", ipaddress.IPv4Address(packed[12:])))
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # :: and ::1 are IPv6's own
        found.append(("an IPv4-compatible address", ipaddress.IPv4Address(packed[12:])))
    if address in _NAT64_WELL_KNOWN:
        found.append(("a NAT64 address", ipaddress.IPv4Address(packed[12:])))
    if address in _NAT64_LOCAL_USE:  # the operator's translator chose its prefix length: every reading is judged
        for octets in _RFC6052_OCTETS.values():
            found.append(("a local-use NAT64 address", ipaddress.IPv4Address(bytes(packed[i] for i in octets))))
    if address.sixtofour is not None:
        found.append(("a 6to4 address", address.sixtofour))
    if address.teredo is not None:
        server, client = address.teredo  # the stdlib undoes the client's obfuscation
        found += [("a Teredo address (its server)", server), ("a Teredo address (its client)", client)]
    return found


_own_lock = threading.Lock()
_own: tuple[float, frozenset[IPAddress]] = (0.0, frozenset())


def own_addresses() -> frozenset[IPAddress]:
    """This host's own interface addresses (Linux: /proc/net; re-read every 30 s), public ones included."""
    global _own
    with _own_lock:
        if time.monotonic() - _own[0] < _OWN_ADDRESSES_TTL_S:
            return _own[1]
        found: set[IPAddress] = set()
        try:
            with open("/proc/net/fib_trie") as f:
                lines = f.read().splitlines()
            for previous, line in zip(lines, lines[1:], strict=False):
                if line.strip().startswith("/32 host LOCAL"):
                    found.add(ipaddress.ip_address(previous.split()[-1]))
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open("/proc/net/if_inet6") as f:
                for line in f:
                    raw = line.split()[0]
                    found.add(ipaddress.ip_address(":".join(raw[i : i + 4] for i in range(0, 32, 4))))
        except (OSError, ValueError, IndexError):
            pass
        _own = (time.monotonic(), frozenset(found))
        return _own[1]


def resolve(host: str, port: int) -> list[IPAddress]:
    """The host's addresses, resolved once (an IP literal is its own address); EgressRefused if it has none."""
    try:
        return [ipaddress.ip_address(host.strip("[]").split("%")[0])]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Unresolvable(f"{host} could not be resolved ({exc})") from None
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise Unresolvable(f"{host} has no address")
    return addresses


def checked_addresses(
    host: str, port: int, *, allowed: list[Allowance] | None = None, path: str | None = None, base: bool = False
) -> list[IPAddress]:
    """The addresses of host:port a connection may use, resolved once and each checked; EgressRefused if none.

    An address is usable when it is on the public internet or the operator allows it (by name, address or
    network, and port; an HTTP request's `path` too, `base` when it is a base URL's). A name whose answer mixes
    public and internal addresses is used only at its public ones. An HTTP request never reaches this server itself.
    """
    host = host.strip("[]").lower().rstrip(".")
    if not host:
        raise EgressRefused("the URL has no host")
    addresses = resolve(host, port)
    allowed_by_operator = allowances() if allowed is None else allowed
    usable, refused = [], []
    for address in addresses:
        if path is not None and (reason := own_server_reason(host, address, port)) is not None:
            refused.append((address, reason, False))
        elif (
            any(a.admits(host, address, port, path, base) for a in allowed_by_operator)
            or (reason := refusal_reason(address)) is None
        ):
            usable.append(address)
        elif any(replace(a, paths=None).admits(host, address, port, path) for a in allowed_by_operator if a.paths):
            reason = (
                "the deployment's model endpoint, which requests made for users reach only at its model API's paths"
            )
            refused.append((address, reason, False))
        else:
            refused.append((address, reason, True))
    if not usable:
        address, reason, can_allow = refused[0]
        named = f"{host} ({address})" if str(address) != host else host
        where = f"{named}:{port}{path}" if path and not base and not can_allow else named
        hint = "requests made for users reach only the public internet (an operator can allow it in EGRESS_ALLOW)"
        raise EgressRefused(f"{where} is {reason}" + (f"; {hint}" if can_allow else ""))
    return usable


def check_url(url: str, *, base: bool = False) -> list[IPAddress]:
    """Check an http(s) URL's destination now (configuration time, and before a call); EgressRefused if refused.
    `base`: the URL is a base the requests go under (a provider's), admitted where it leads to a model API's paths."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError as exc:
        raise EgressRefused(f"not a valid URL: {exc}") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        raise EgressRefused("only http:// and https:// URLs with a host can be reached")
    return checked_addresses(parts.hostname, port, path=parts.path or "/", base=base)


def connect(host: str, port: int, *, timeout: float = 10.0, allowed: list[Allowance] | None = None) -> socket.socket:
    """A TCP connection to host:port at a checked address (the first that answers); EgressRefused or OSError."""
    last: OSError | None = None
    for address in checked_addresses(host, port, allowed=allowed):
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect((str(address), port))
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.settimeout(None)
        return sock
    raise last or OSError(f"could not connect to {host}:{port}")


def _pinned(module, request, address: IPAddress):
    """The request sent to a checked address: the Host header and TLS name stay the URL's own."""
    url = request.url
    extensions = dict(request.extensions)
    if url.scheme == "https":
        extensions.setdefault("sni_hostname", url.host)
    return module.Request(
        request.method,
        url.copy_with(host=str(address)),
        headers=request.headers,  # carries Host: as the client set it from the URL
        stream=request.stream,
        extensions=extensions,
    )


def _port(url) -> int:
    return url.port or DEFAULT_PORTS.get(url.scheme, 443)


def _path(url) -> str:
    """The request's path as sent (still percent-encoded: the guard judges what the server will read)."""
    return url.raw_path.decode("ascii").partition("?")[0] or "/"


def transports(module):
    """(sync, async) transport classes for `module` (httpx, or httpx2 which the MCP SDK uses) that send every
    request — each redirect hop too — through the guard to a checked address. Keyword arguments go to the
    module's own HTTPTransport; a separate one is kept per host, so a TLS connection is never reused for another
    name."""

    class GuardedTransport(module.BaseTransport):
        def __init__(self, **kwargs):
            self._kwargs, self._inner, self._lock = kwargs, {}, threading.Lock()

        def handle_request(self, request):
            address = checked_addresses(request.url.host, _port(request.url), path=_path(request.url))[0]
            with self._lock:
                inner = self._inner.setdefault(request.url.host, module.HTTPTransport(**self._kwargs))
            return inner.handle_request(_pinned(module, request, address))

        def close(self):
            for inner in self._inner.values():
                inner.close()

    class AsyncGuardedTransport(module.AsyncBaseTransport):
        def __init__(self, **kwargs):
            self._kwargs, self._inner = kwargs, {}

        async def handle_async_request(self, request):
            import anyio  # httpx's own dependency; resolution must not block the event loop

            host, port = request.url.host, _port(request.url)
            addresses = await anyio.to_thread.run_sync(
                functools.partial(checked_addresses, host, port, path=_path(request.url))
            )
            inner = self._inner.setdefault(host, module.AsyncHTTPTransport(**self._kwargs))
            return await inner.handle_async_request(_pinned(module, request, addresses[0]))

        async def aclose(self):
            for inner in self._inner.values():
                await inner.aclose()

    return GuardedTransport, AsyncGuardedTransport


def guarded_client(*, module=None, **kwargs):
    """An httpx Client whose every request goes through the guard (environment proxies ignored: they would
    bypass it)."""
    import httpx  # loaded by the callers that make requests for users, not by every process

    module = module or httpx
    sync, _ = transports(module)
    return module.Client(transport=sync(), trust_env=False, **kwargs)


def guarded_async_client(*, module=None, **kwargs):
    """An async httpx client whose every request goes through the guard (environment proxies ignored)."""
    import httpx  # loaded by the callers that make requests for users, not by every process

    module = module or httpx
    _, asynchronous = transports(module)
    return module.AsyncClient(transport=asynchronous(), trust_env=False, **kwargs)
