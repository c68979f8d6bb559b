"""Uploaded bytes to text, with page boundaries where the format has them (markitdown, as Letta parses files).

markitdown turns PDF, DOCX, PPTX, XLSX and HTML into Markdown with one maintained dependency per format (pdfminer,
mammoth, python-pptx, openpyxl); PDF pages come back separated by form feeds, which is how pages are counted.
A zip-based document is checked against the archive limits before a converter opens it (memory.files.archive), and
the text against its length limit. The ingest runs documents through `parse` in a process of their own, under memory,
CPU and time limits (memory.files.isolate); only plain text is read in the server's process.
"""

import io
from dataclasses import dataclass

from memory.files import types
from memory.files.archive import ArchiveRefused, archive_check
from memory.files.limits import ParseLimits

PAGE_BREAK = "\f"


class ParseError(Exception):
    """The file could not be read as its type says (corrupt, encrypted, not really that format)."""


@dataclass(frozen=True)
class Parsed:
    text: str  # pages joined by PAGE_BREAK
    pages: int


ZIPPED = {types.DOCUMENTS[".docx"], types.DOCUMENTS[".pptx"], types.DOCUMENTS[".xlsx"]}


def parse(*, data: bytes, mime: str, file_name: str, limits: ParseLimits = ParseLimits()) -> Parsed:
    """The text of an upload; raises ParseError with a reason a person can act on (a limit passed among them).
    CPU only, no I/O; unbounded in memory and CPU but for the archive check: documents go through the isolated
    process (memory.files.isolate)."""
    if types.is_plain(mime):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ParseError(f"The file is not UTF-8 text (byte {exc.start} cannot be decoded)") from None
        return Parsed(text=text_bounded(text.replace("\x00", ""), limits=limits), pages=1)
    if mime in ZIPPED:
        try:
            archive_check(data, limits=limits.archive)
        except ArchiveRefused as exc:
            raise ParseError(str(exc)) from None
    text = _markitdown(data=data, mime=mime, file_name=file_name)
    text = text_bounded(text.replace("\x00", "").strip(PAGE_BREAK + "\n "), limits=limits)
    if not text.strip():
        raise ParseError("No text could be extracted from the file (a scanned or empty document?)")
    return Parsed(text=text, pages=text.count(PAGE_BREAK) + 1)


def text_bounded(text: str, *, limits: ParseLimits) -> str:
    """The text, or ParseError when it is longer than the limit (FOLDER_FILE_MAX_CHARS)."""
    if len(text) > limits.max_chars:
        raise ParseError(f"The file's text is longer than {limits.max_chars:,} characters")
    return text


def _markitdown(*, data: bytes, mime: str, file_name: str) -> str:
    # Importing markitdown takes most of a second (pdfminer, magika); only the ingest task needs it.
    import mammoth
    from markitdown import StreamInfo
    from markitdown.converters import HtmlConverter, PdfConverter, PptxConverter, XlsxConverter

    # One converter per type rather than MarkItDown.convert_stream: that one falls back to reading a corrupt PDF
    # as plain text, so a broken file would "succeed" with its raw bytes as content.
    info = StreamInfo(mimetype=mime, extension=types.extension(file_name) or None, filename=file_name)
    stream = io.BytesIO(data)
    try:
        if mime == types.DOCUMENTS[".docx"]:
            # markitdown's DocxConverter pre-processes the XML and loses its namespaces with python-docx's files;
            # mammoth (its own DOCX reader) to HTML, then its HTML converter, gives the same Markdown.
            return HtmlConverter().convert_string(mammoth.convert_to_html(stream).value).markdown
        converter = {
            types.DOCUMENTS[".pdf"]: PdfConverter,
            types.DOCUMENTS[".pptx"]: PptxConverter,
            types.DOCUMENTS[".xlsx"]: XlsxConverter,
            types.DOCUMENTS[".html"]: HtmlConverter,
        }[mime]
        return converter().convert(stream, info).markdown
    except MemoryError:
        raise  # the parser's process reports its memory limit
    except Exception as exc:  # each converter raises its own library's errors; any of them means "unreadable"
        raise ParseError(f"Could not parse the file as {mime}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
