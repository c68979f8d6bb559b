"""What the operator lets tenants run: stdio MCP servers (`MCP_STDIO`) and network for tools and MCP servers
(`TOOL_NETWORK`), each "all", "staff" or "off". Checked when a server or tool is configured (a clear 403) and
again each time one starts or runs, so tightening a setting takes effect without touching stored rows.

Accounts are organizations; one is trusted as staff when a staff user belongs to it (each user's own
organization, as accounts are made today).
"""

from __future__ import annotations

import logging
import os
import pwd

from django.conf import settings

from core.errors import Forbidden
from core.models import Membership, Organization

log = logging.getLogger(__name__)

_CHOICES = ("all", "staff", "off")


def _policy(name: str) -> str:
    value = str(getattr(settings, name, "") or "").strip().lower()
    return value if value in _CHOICES else "off"  # a mistyped setting must not open anything


def organization_is_staff(owner: Organization) -> bool:
    """Whether a staff user belongs to the organization."""
    return Membership.objects.filter(organization=owner, user__is_staff=True, user__is_active=True).exists()


def _allows(name: str, owner: Organization) -> bool:
    policy = _policy(name)
    return policy == "all" or (policy == "staff" and organization_is_staff(owner))


def stdio_refusal(owner: Organization) -> str | None:
    """Why this account may not run stdio MCP servers (None: it may)."""
    if _allows("MCP_STDIO", owner):
        return None
    if _policy("MCP_STDIO") == "off":
        return "stdio MCP servers are turned off on this deployment (MCP_STDIO=off); use an SSE or HTTP server"
    return (
        "stdio MCP servers run processes on this server, which only staff accounts may do here (MCP_STDIO=staff); "
        "use an SSE or HTTP server, or ask the operator"
    )


def stdio_check(owner: Organization) -> None:
    """Raise Forbidden (403) unless the account may register stdio MCP servers."""
    if reason := stdio_refusal(owner):
        raise Forbidden(reason, detail={"mcp_server_type": reason})


def network_permitted(owner: Organization) -> bool:
    """Whether this account's tools and MCP servers may be given network access (the public internet only)."""
    return _allows("TOOL_NETWORK", owner)


def network_check(owner: Organization, wanted: bool | None) -> None:
    """Raise Forbidden (403) when the account asks for network it may not have (`wanted` True)."""
    if wanted and not network_permitted(owner):
        reason = f"network access for tools is not permitted for this account (TOOL_NETWORK={_policy('TOOL_NETWORK')})"
        raise Forbidden(reason, detail={"allow_network": reason})


def _never_visible() -> tuple[list[str], list[str]]:
    """What no MCP server may see, whatever the operator approves: (places an approved directory may neither hold
    nor sit inside — the data directory, the database's socket, the source tree, home directories, the kernel's
    and the running system's trees; places it may not hold — the system's own directories)."""
    homes = {"/root", "/home"}
    try:
        homes |= {p.pw_dir for p in pwd.getpwall() if p.pw_dir not in ("/", "") and p.pw_dir.startswith("/home/")}
    except OSError:
        pass
    sensitive = [str(settings.DATA_DIR), str(settings.BASE_DIR), "/var/run/postgresql", "/run/postgresql"]
    sensitive += ["/proc", "/sys", "/dev", "/run", *homes]
    system = ["/etc", "/var", "/tmp", "/boot", "/usr", "/opt", "/srv", "/mnt", "/media"]
    real = lambda paths: sorted({os.path.realpath(p) for p in paths if p})  # noqa: E731
    return real(sensitive), real(system)


def mcp_stdio_paths() -> tuple[str, ...]:
    """The approved directories for stdio MCP servers (MCP_STDIO_PATHS) that are safe to show them read-only: an
    existing absolute directory that does not overlap a sensitive place and holds no system directory (others are
    left out, with a warning in the log)."""
    approved = []
    sensitive, system = _never_visible()
    for raw in settings.MCP_STDIO_PATHS:
        raw = raw.strip()
        path = os.path.realpath(raw)
        clash = next((f for f in sensitive if _inside(path, f) or _inside(f, path)), None)
        clash = clash or next((f for f in system if _inside(f, path)), None)
        if not os.path.isabs(raw) or not os.path.isdir(path) or clash is not None:
            log.warning("MCP_STDIO_PATHS: %r is left out (%s)", raw, f"it overlaps {clash}" if clash else "no such dir")
            continue
        approved.append(path)
    return tuple(approved)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
