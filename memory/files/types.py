"""Which uploads a folder accepts: a MIME type for each extension, and whether it is text read as-is."""

import mimetypes
import os

# Read as UTF-8 text, one "page"; numbered lines keep their indentation.
CODE = {
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".ts": "text/x-typescript",
    ".jsx": "text/jsx",
    ".tsx": "text/tsx",
    ".java": "text/x-java",
    ".c": "text/x-c",
    ".cpp": "text/x-c++",
    ".h": "text/x-c",
    ".cs": "text/x-csharp",
    ".php": "text/x-php",
    ".rb": "text/x-ruby",
    ".go": "text/x-go",
    ".rs": "text/x-rust",
    ".swift": "text/x-swift",
    ".kt": "text/x-kotlin",
    ".scala": "text/x-scala",
    ".r": "text/x-r",
    ".sql": "text/x-sql",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".css": "text/css",
    ".scss": "text/x-scss",
    ".vue": "text/x-vue",
    ".yaml": "text/yaml",
    ".yml": "text/yaml",
    ".toml": "text/x-toml",
    ".ini": "text/x-ini",
    ".cfg": "text/x-ini",
    ".xml": "application/xml",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
}
TEXT = {".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv"}
# Converted to Markdown by markitdown.
DOCUMENTS = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".html": "text/html",
    ".htm": "text/html",
}
BY_EXTENSION = {**CODE, **TEXT, **DOCUMENTS}
SUPPORTED_MIME = set(BY_EXTENSION.values())
SUPPORTED_TEXT = (
    "Supported types: PDF, DOCX, PPTX, XLSX, HTML, text files (.txt, .md, .csv), JSON, and code files (.py, .js, "
    ".java, etc.)."
)


def extension(file_name: str) -> str:
    return os.path.splitext(file_name or "")[1].lower()


def mime_for(*, file_name: str, content_type: str | None) -> str | None:
    """The file's MIME type if a folder accepts it: the extension decides when it is known (browsers and SDKs
    send application/octet-stream or a guess), else the part's Content-Type; None when neither is supported."""
    by_name = BY_EXTENSION.get(extension(file_name))
    if by_name:
        return by_name
    declared = (content_type or "").split(";")[0].strip().lower()
    if declared in SUPPORTED_MIME:
        return declared
    guessed = mimetypes.guess_type(file_name or "")[0]
    return guessed if guessed in SUPPORTED_MIME else None


def is_code(mime: str) -> bool:
    return mime in CODE.values()


def is_plain(mime: str) -> bool:
    """Text decoded as UTF-8 directly rather than converted."""
    return mime in CODE.values() or mime in TEXT.values()
