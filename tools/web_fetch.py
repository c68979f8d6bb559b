"""fetch_webpage: one http(s) GET through the egress guard (core/egress.py: public internet only, each redirect
checked), size-capped and time-limited, HTML turned into Markdown, text and JSON passed through.

HTML to Markdown: markdownify (MIT, pure Python over BeautifulSoup's stdlib parser, maintained, no network). html2text
is GPL-3.0 (this project is Apache-2.0) and trafilatura brings lxml and half a dozen extraction packages; a page's
boilerplate (scripts, styles, navigation, forms) is removed here before conversion, and `<main>`/`<article>` is
preferred when the page has one.
"""

from __future__ import annotations

import re
import time
from urllib.parse import urljoin, urlsplit

import httpx
from django.conf import settings

from core.egress import EgressRefused, guarded_client

USER_AGENT = "Mozilla/5.0 (compatible; AgentsIDE/1.0; +fetch_webpage)"
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/x-ndjson")
_BOILERPLATE = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
    "form",
    "button",
    "nav",
    "aside",
    "footer",
)


class WebToolError(Exception):
    """A web tool call that failed: the message is for the model, `type_name` the exception name it reads."""

    def __init__(self, message: str, type_name: str = "Exception"):
        super().__init__(message)
        self.type_name = type_name


def fetch_webpage(*, url: str) -> str:
    """GET an http(s) page through the egress guard (size-capped, time-limited) and return it as Markdown, or as
    the text it is; WebToolError for another scheme, a refused or failed request, or a binary file."""
    url = url.strip()
    scheme = urlsplit(url).scheme
    if scheme.lower() not in ("http", "https"):
        raise WebToolError(
            f"Invalid URL scheme '{scheme}'. Only 'http' and 'https' URLs are supported. "
            "Local file paths (file://) and other protocols cannot be fetched.",
            "ValueError",
        )
    timeout = float(settings.WEB_TOOLS_TIMEOUT_S)
    headers = {"User-Agent": USER_AGENT, "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"}
    try:
        with guarded_client(timeout=timeout, follow_redirects=True, max_redirects=10, headers=headers) as client:
            with client.stream("GET", url) as response:
                return _page_text(response, deadline=time.monotonic() + timeout)
    except EgressRefused as exc:
        raise WebToolError(f"Error fetching webpage: {url} was not fetched: {exc}", "EgressRefused") from None
    except httpx.TimeoutException:
        raise WebToolError(f"Error fetching webpage: {url} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise WebToolError(f"Error fetching webpage: {exc}") from None


def _page_text(response: httpx.Response, *, deadline: float) -> str:
    if response.status_code >= 400:
        raise WebToolError(
            f"Error fetching webpage: HTTP {response.status_code} {response.reason_phrase} for url {response.url}"
        )
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    kind = _kind(content_type)
    if kind == "binary":
        raise WebToolError(_binary_message(response, content_type), "ValueError")
    body, cut = _read_capped(response, deadline=deadline)
    if kind == "unknown":
        kind = _sniff(body)
        if kind == "binary":
            raise WebToolError(_binary_message(response, content_type or "a file of unknown type"), "ValueError")
    text = (
        html_to_markdown(body, encoding=response.charset_encoding, base_url=str(response.url))
        if kind == "html"
        else body.decode(response.charset_encoding or "utf-8", errors="replace")
    )
    if cut:
        limit = int(settings.WEB_FETCH_MAX_BYTES)
        text += f"\n\n[NOTE: the page is larger than {limit} bytes; only its first {limit} bytes were read]"
    return text


def _kind(content_type: str) -> str:
    """ "html", "text", "binary", or "unknown" (no type, or a generic one: the body decides)."""
    if content_type in _HTML_TYPES:
        return "html"
    if not content_type or content_type == "application/octet-stream":
        return "unknown"
    if content_type.startswith("text/") or content_type in _TEXT_TYPES or content_type.endswith(("+json", "+xml")):
        return "text"
    return "binary"


def _sniff(body: bytes) -> str:
    """What an untyped body is: an HTML page, UTF-8 text, or binary."""
    head = body[:1024].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "html"
    sample = body[:8192]
    if b"\x00" in sample:
        return "binary"
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        cut_at_the_end = len(sample) < len(body) and exc.start >= len(sample) - 3  # a character split by the sample
        if not cut_at_the_end:
            return "binary"
    return "text"


def _binary_message(response: httpx.Response, content_type: str) -> str:
    size = response.headers.get("content-length")
    return (
        f"{response.url} is {content_type}{f' ({size} bytes)' if size else ''}, not a web page: fetch_webpage reads "
        "HTML, plain text and JSON, not binary files."
    )


def _read_capped(response: httpx.Response, *, deadline: float) -> tuple[bytes, bool]:
    """The body up to WEB_FETCH_MAX_BYTES (and whether it was cut there); WebToolError past the deadline."""
    limit = int(settings.WEB_FETCH_MAX_BYTES)
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        if time.monotonic() > deadline:
            raise WebToolError(f"Error fetching webpage: {response.url} took longer than the time limit to download")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def html_to_markdown(html: bytes | str, *, encoding: str | None = None, base_url: str = "") -> str:
    """A page's readable content as Markdown: boilerplate removed, `<main>`/`<article>` preferred, links made
    absolute, images reduced to their alt text; the page's title heads it unless the content starts with it."""
    # Loaded on the first fetch, not by every process that imports the tool runner.
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser", from_encoding=encoding if isinstance(html, bytes) else None)
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_BOILERPLATE):
        tag.decompose()
    for img in soup.find_all("img"):
        alt = (img.get("alt") or "").strip()
        if alt:
            img.replace_with(alt)
        else:
            img.decompose()
    for link in soup.find_all("a", href=True):
        href = urljoin(base_url, link["href"].strip())
        if urlsplit(href).scheme in ("http", "https", "mailto"):
            link["href"] = href
        else:
            del link["href"]  # javascript: and the like mean nothing to the model
    content = soup.find("main") or soup.find("article") or soup.body or soup
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(content)
    markdown = re.sub(r"[ \t]+\n", "\n", markdown)
    markdown = re.sub(r"\n{3,}", "\n\n", markdown).strip()
    if title and not markdown.lstrip("# ").startswith(title):
        markdown = f"# {title}\n\n{markdown}" if markdown else f"# {title}"
    return markdown
