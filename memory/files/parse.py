"""Uploaded bytes to text, with page boundaries where the format has them (markitdown, as Letta parses files).

markitdown turns PDF, DOCX, PPTX, XLSX and HTML into Markdown with one maintained dependency per format (pdfminer,
mammoth, python-pptx, openpyxl); PDF pages come back separated by form feeds, which is how pages are counted.
"""

import io
from dataclasses import dataclass

from memory.files import types

PAGE_BREAK = "\f"


class ParseError(Exception):
    """The file could not be read as its type says (corrupt, encrypted, not really that format)."""


@dataclass(frozen=True)
class Parsed:
    text: str  # pages joined by PAGE_BREAK
    pages: int


def parse(*, data: bytes, mime: str, file_name: str) -> Parsed:
    """The text of an upload; raises ParseError with a reason a person can act on. CPU only, no I/O."""
    if types.is_plain(mime):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ParseError(f"The file is not UTF-8 text (byte {exc.start} cannot be decoded)") from None
        return Parsed(text=text.replace("\x00", ""), pages=1)
    text = _markitdown(data=data, mime=mime, file_name=file_name)
    text = text.replace("\x00", "").strip(PAGE_BREAK + "\n ")
    if not text.strip():
        raise ParseError("No text could be extracted from the file (a scanned or empty document?)")
    return Parsed(text=text, pages=text.count(PAGE_BREAK) + 1)


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
    except Exception as exc:  # each converter raises its own library's errors; any of them means "unreadable"
        raise ParseError(f"Could not parse the file as {mime}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
