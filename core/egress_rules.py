"""What the operator lets past the egress guard (core/egress.py): `EGRESS_ALLOW`'s hosts, addresses and networks, the
deployment's model endpoints at their model API's paths only, and `PUBLIC_BASE_URL` for the sandbox's raw connections
(tools call back into this server) only."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, replace
from urllib.parse import unquote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# The deployment's own model endpoints, read from the environment (the same variables core/providers.py reads).
OPERATOR_URL_VARS = {
    "OPENAI_BASE_URL": "openai",
    "ANTHROPIC_BASE_URL": "anthropic",
    "DEEPSEEK_API_BASE": "openai",
    "OLLAMA_API_BASE": "ollama",
}
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Allowance:
    """One destination the operator allows: a host name, or a network; on one port or on every port. `paths`: only
    HTTP requests at these paths (and below) are admitted, never a raw connection (an operator's model endpoint:
    the model API, not the rest of that host). `requests=False`: raw connections only (the sandbox's proxy: tools
    call back into this server), never a request the server makes itself."""

    host: str = ""
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None
    paths: tuple[str, ...] | None = None
    requests: bool = True

    def admits(self, host: str, address: IPAddress, port: int, path: str | None = None, base: bool = False) -> bool:
        """Whether this allowance admits a connection (`path` None) or an HTTP request at `path` (`base`: a base URL
        the requests will be made under, admitted when it leads to one of `paths`)."""
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            if unmapped(address) not in self.network:
                return False
        elif self.host != host.lower().rstrip("."):
            return False
        if path is None:
            return self.paths is None
        if not self.requests:
            return False
        return self.paths is None or _within(path, self.paths, base=base)


def _within(path: str, allowed: tuple[str, ...], *, base: bool) -> bool:
    """Whether an HTTP path is one of `allowed` or below one (`base`: leads to one); a path with dot segments,
    empty segments or backslashes, however encoded, is not."""
    decoded = unquote(path) or "/"
    segments = decoded.split("/")[1:]
    if "\\" in decoded or any(s in (".", "..") for s in segments) or "" in segments[:-1]:
        return False
    decoded = decoded.rstrip("/") or "/"
    if base:
        return any(a == decoded or a.startswith(decoded.rstrip("/") + "/") for a in allowed)
    return any(decoded == a or decoded.startswith(a + "/") for a in allowed)


def parse_allowance(text: str) -> Allowance:
    """`host`, `host:port`, `10.0.0.0/8`, `10.0.0.5:11434`, `[fd00::1]:8080` or a URL -> an Allowance."""
    text = text.strip()
    if "://" in text:
        parts = urlsplit(text)
        return _allowance(parts.hostname or "", parts.port or DEFAULT_PORTS.get(parts.scheme))
    port: int | None = None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = int(port_text)
    else:
        host = text
    return _allowance(host, port)


def _allowance(host: str, port: int | None) -> Allowance:
    try:
        return Allowance(network=ipaddress.ip_network(host, strict=False), port=port)
    except ValueError:
        return Allowance(host=host.lower().rstrip("."), port=port)


def allowances(extra: list[str] | tuple[str, ...] = ()) -> list[Allowance]:
    """What the operator allows beyond the public internet: EGRESS_ALLOW (and `extra`, in the same forms), the
    deployment's model endpoints at their model API's paths, and PUBLIC_BASE_URL for raw connections only."""
    # Read at call time: the sandbox's proxy imports this module in processes without Django (tests' server as
    # an ordinary user), where the allowances are passed in instead.
    from django.conf import settings

    found = []
    for entry in [*settings.EGRESS_ALLOW, *extra]:
        try:
            found.append(parse_allowance(entry))
        except ValueError:
            continue  # a malformed entry allows nothing (settings are read as given; docs/security.md shows the forms)
    for var, kind in OPERATOR_URL_VARS.items():
        if url := os.environ.get(var, ""):
            try:
                found.append(replace(parse_allowance(url), paths=model_api_paths(url, kind)))
            except ValueError:
                continue
    try:
        found.append(replace(parse_allowance(settings.PUBLIC_BASE_URL), requests=False))
    except ValueError:
        pass
    return found


# The paths a model API of each kind serves (relative to its base URL): what litellm and our clients call.
_OPENAI_PATHS = ("/chat/completions", "/completions", "/embeddings", "/models", "/responses")
_MODEL_API_PATHS = {
    "openai": (*_OPENAI_PATHS, *(f"/v1{p}" for p in _OPENAI_PATHS)),
    "anthropic": ("/v1/messages", "/v1/models", "/v1/complete"),
    "ollama": (
        *("/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/api/tags", "/api/show", "/api/version"),
        *(f"/v1{p}" for p in ("/chat/completions", "/completions", "/embeddings", "/models")),
    ),
}


def model_api_paths(base_url: str, kind: str) -> tuple[str, ...]:
    """The paths under `base_url` a model API of `kind` (openai, anthropic, ollama) is called at."""
    prefix = urlsplit(base_url).path.rstrip("/")
    return tuple(prefix + p for p in _MODEL_API_PATHS[kind])


def unmapped(address: IPAddress) -> IPAddress:
    """An IPv4 address written as IPv6 (::ffff:127.0.0.1, 6to4's embedded one) is matched as the IPv4 it is."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
    return address
