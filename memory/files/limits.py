"""How far one uploaded document may take the server: its unpacked size, the parser process's memory, CPU and time,
the text and passages it may yield, and what an account may store (docs/security.md lists them).

The defaults are agents_ide/settings.py's; they are repeated here so the parser's own process, which has no Django,
and a direct `parse()` get the same numbers.
"""

from dataclasses import asdict, dataclass

MB = 1024 * 1024


@dataclass(frozen=True)
class ArchiveLimits:
    """What a zip-based document (DOCX, PPTX, XLSX) may unpack to, nested archives included."""

    max_expanded: int = 200 * MB  # bytes decompressed, every entry of every nested archive together
    max_entries: int = 10_000
    max_ratio: float = 200.0  # one entry's decompressed bytes per compressed byte, past RATIO_GRACE of output
    max_depth: int = 3  # archives inside archives (a DOCX embeds its charts' workbooks: depth 1)


@dataclass(frozen=True)
class ParseLimits:
    """What one parse may use and yield."""

    archive: ArchiveLimits = ArchiveLimits()
    max_chars: int = 10_000_000  # of extracted text
    memory_mb: int = 1024  # the parser process's address space (RLIMIT_AS); importing the parsers takes ~300 MB
    cpu_s: int = 300  # its CPU seconds (RLIMIT_CPU)
    timeout_s: float = 600.0  # its wall-clock time (it runs at a lower priority, so a busy machine slows it)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ParseLimits":
        return cls(**{**data, "archive": ArchiveLimits(**data["archive"])})


def parse_limits() -> ParseLimits:
    """The deployment's limits (FOLDER_FILE_MAX_EXPANDED_BYTES and the others), read when asked."""
    from django.conf import settings  # lazy: the parser's process imports this module without Django

    base, archive = ParseLimits(), ArchiveLimits()
    return ParseLimits(
        archive=ArchiveLimits(
            max_expanded=int(getattr(settings, "FOLDER_FILE_MAX_EXPANDED_BYTES", archive.max_expanded)),
            max_entries=int(getattr(settings, "FOLDER_FILE_MAX_ENTRIES", archive.max_entries)),
            max_ratio=float(getattr(settings, "FOLDER_FILE_MAX_RATIO", archive.max_ratio)),
            max_depth=int(getattr(settings, "FOLDER_FILE_MAX_NESTING", archive.max_depth)),
        ),
        max_chars=int(getattr(settings, "FOLDER_FILE_MAX_CHARS", base.max_chars)),
        memory_mb=int(getattr(settings, "FOLDER_PARSE_MEMORY_MB", base.memory_mb)),
        cpu_s=int(getattr(settings, "FOLDER_PARSE_CPU_S", base.cpu_s)),
        timeout_s=float(getattr(settings, "FOLDER_PARSE_TIMEOUT_S", base.timeout_s)),
    )


def setting(name: str, default: int) -> int:
    """An integer limit from settings (FOLDER_FILE_MAX_PASSAGES, the account quotas), read when asked."""
    from django.conf import settings  # lazy, as above

    return int(getattr(settings, name, default))


def size_text(n: int) -> str:
    """A byte count as a person reads it: "200 MB", or exact bytes below a megabyte."""
    return f"{n / MB:.4g} MB" if n >= MB else f"{n:,} bytes"
