"""Zip-based documents (DOCX, PPTX, XLSX) checked before a parser unpacks them, so a small upload cannot expand into
hundreds of megabytes of XML: the entry count, the sizes and ratios the central directory declares, then every entry
unpacked once counting the bytes it really yields (a header may lie), archives inside it included.

Only the standard library's public `zipfile` API; CPU only, no I/O. Run in the parser's process (memory.files.parse),
whose memory and CPU are limited too; the declared listing alone is also checked before that process starts.
"""

import io
import zipfile
import zlib

from memory.files.limits import MB, ArchiveLimits, size_text

ZIP_MAGIC = b"PK\x03\x04"
# An entry's ratio counts once it has produced this much: a small part of any ratio is harmless, and real documents
# hold small, very repetitive parts (styles, empty sheets).
RATIO_GRACE = MB
READ_CHUNK = 256 * 1024


class ArchiveRefused(Exception):
    """The document would unpack past a limit, or cannot be unpacked; the message says which, for a person."""


def is_zip(data: bytes) -> bool:
    return data[:4] == ZIP_MAGIC


class _Budget:
    """What every archive of one document has used so far: entries seen and bytes decompressed."""

    def __init__(self, limits: ArchiveLimits):
        self.limits = limits
        self.entries = 0
        self.expanded = 0

    def add_entries(self, n: int) -> None:
        self.entries += n
        if self.entries > self.limits.max_entries:
            raise ArchiveRefused(f"The document holds more than {self.limits.max_entries:,} files inside")

    def add_bytes(self, n: int) -> None:
        self.expanded += n
        if self.expanded > self.limits.max_expanded:
            raise _too_big(self.limits)


def _too_big(limits: ArchiveLimits) -> ArchiveRefused:
    return ArchiveRefused(f"The document expands to more than {size_text(limits.max_expanded)} when unpacked")


def _label(name: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in name[:120])


def _too_compressed(name: str, limits: ArchiveLimits) -> ArchiveRefused:
    return ArchiveRefused(
        f"Part '{_label(name)}' of the document is compressed more than {limits.max_ratio:g} to 1 (a zip bomb?)"
    )


def archive_listing_check(data: bytes, *, limits: ArchiveLimits) -> None:
    """Refuse a zip whose central directory declares too many entries, too many bytes in all or an entry compressed
    past the ratio; reads the directory only (cheap). ArchiveRefused, also for a file that is no zip."""
    with _opened(data, outer=True) as archive:
        _listing(archive.infolist(), limits, _Budget(limits))


def archive_check(data: bytes, *, limits: ArchiveLimits) -> None:
    """Refuse a zip past any limit: its declared listing, then every entry unpacked counting the bytes it really
    yields and its real ratio, with the archives it holds checked the same way (their bytes and entries count
    towards the same limits). Raises ArchiveRefused."""
    _check(data, limits, _Budget(limits), depth=0, prefix="")


def _opened(data: bytes, *, outer: bool) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError) as exc:
        if outer:
            raise ArchiveRefused(f"The document is not a readable zip archive: {exc}") from None
        raise


def _listing(infos: list[zipfile.ZipInfo], limits: ArchiveLimits, budget: _Budget) -> None:
    budget.add_entries(len(infos))
    if budget.expanded + sum(info.file_size for info in infos) > limits.max_expanded:
        raise _too_big(limits)
    for info in infos:
        if info.file_size > RATIO_GRACE and info.file_size > limits.max_ratio * max(info.compress_size, 1):
            raise _too_compressed(info.filename, limits)


def _check(data: bytes, limits: ArchiveLimits, budget: _Budget, *, depth: int, prefix: str) -> None:
    try:
        archive = _opened(data, outer=depth == 0)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError):
        return  # an inner part that only looks like a zip: its bytes are counted already, no parser opens it
    with archive:
        infos = [info for info in archive.infolist() if not info.is_dir()]
        _listing(infos, limits, budget)
        for info in infos:
            inner = _unpacked(archive, info, limits, budget, prefix)
            if inner is None:
                continue
            if depth + 1 > limits.max_depth:
                raise ArchiveRefused(f"The document nests archives more than {limits.max_depth} deep")
            _check(inner, limits, budget, depth=depth + 1, prefix=f"{prefix}{info.filename}/")


def _unpacked(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ArchiveLimits, budget: _Budget, prefix: str
) -> bytes | None:
    """Decompress one entry counting its bytes; returns them when the entry is itself a zip (to check it too)."""
    produced, kept = 0, None
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(READ_CHUNK):
                if produced == 0 and is_zip(chunk):
                    kept = []
                produced += len(chunk)
                budget.add_bytes(len(chunk))
                if produced > RATIO_GRACE and produced > limits.max_ratio * max(info.compress_size, 1):
                    raise _too_compressed(prefix + info.filename, limits)
                if kept is not None:
                    kept.append(chunk)
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, zlib.error, EOFError, OSError) as exc:
        # a bad CRC, an encrypted entry, an unknown compression method, truncated data
        raise ArchiveRefused(
            f"Part '{_label(prefix + info.filename)}' of the document cannot be unpacked: {exc}"
        ) from None
    return b"".join(kept) if kept is not None else None
