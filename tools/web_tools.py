"""The built-in web tools, Letta's `web_search` and `fetch_webpage`, run in the server's process.

Network. They exist to reach the web, so attaching one is the owner's choice of network for that agent: they run
whenever the operator lets the account have network at all (`TOOL_NETWORK`, tools/policy.py). The owner's
"network for tools that don't choose" default (`SANDBOX_ALLOW_NETWORK`, Settings) is about code in the sandbox and
does not apply. Every URL an agent names, and an agent's own `SEARXNG_URL`, is reached through the egress guard
(core/egress.py: public internet only, each redirect checked); the operator's `EXA_API_URL` and `SEARXNG_URL` are
the deployment's own endpoints, reached directly as provider base URLs are.

Keys. An agent's secrets come first, then the server's settings (as in Letta): `EXA_API_KEY` selects Exa (Letta's
provider, over its public HTTP API), else `SEARXNG_URL` selects a SearXNG instance (its JSON API) for self-hosters.

HTML to Markdown: markdownify (MIT, pure Python over BeautifulSoup's stdlib parser, maintained). html2text is
GPL-3.0 (this project is Apache-2.0) and trafilatura brings lxml and half a dozen extraction packages; a page's
boilerplate (scripts, styles, navigation, forms) is removed here before conversion, and `<main>`/`<article>` is
preferred when the page has one.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from urllib.parse import urljoin, urlsplit

import httpx
from django.conf import settings

from core.egress import EgressRefused, guarded_client
from core.engine.base_tools import WEB_TOOL_SCHEMAS
from core.errors import Forbidden, Invalid
from core.models import Agent, Organization
from tools import json_schema as tool_schema
from tools import policy
from tools.models import Tool, ToolRun

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
_SEARXNG_CATEGORIES = {"news": "news", "research paper": "science", "github": "it"}
_SEARXNG_MAX_PAGES = 3


class WebToolError(Exception):
    """A web tool call that failed: the message is for the model, `type_name` the exception name it reads."""

    def __init__(self, message: str, type_name: str = "Exception"):
        super().__init__(message)
        self.type_name = type_name


def web_tool_execute(
    *,
    owner: Organization,
    name: str,
    args: dict,
    tool: Tool | None = None,
    agent: Agent | None = None,
    origin: str = "agent",
    step_id: str = "",
    record: bool = True,
) -> ToolRun:
    """Run `web_search` or `fetch_webpage` (HTTP requests for up to WEB_TOOLS_TIMEOUT_S each) and record a ToolRun
    (`record=False` returns it unsaved). Invalid (422) for arguments that do not fit the schema; a refused or failed
    call is a run with status "error" and its `error_type` set."""
    try:
        args = tool_schema.validate_args(WEB_TOOL_SCHEMAS[name], args if args is not None else {})
    except tool_schema.ArgumentError as exc:
        raise Invalid(str(exc), detail=exc.errors) from exc
    started = time.perf_counter()
    network = policy.network_permitted(owner)
    try:
        if not network:
            policy.network_check(owner, True)
        if name == "fetch_webpage":
            text = fetch_webpage(url=args["url"])
        else:
            text = web_search(secrets=dict(agent.secrets or {}) if agent else {}, **args)
        ok, error_type = True, ""
    except Forbidden as exc:
        text, ok, error_type = exc.message, False, "PermissionError"
    except WebToolError as exc:
        text, ok, error_type = str(exc), False, exc.type_name
    run = ToolRun(
        owner=owner,
        tool=tool,
        tool_name=name,
        agent_id=agent.id if agent else "",
        step_id=step_id,
        origin=origin,
        args=args,
        status="success" if ok else "error",
        tool_return=text,
        stderr="" if ok else text,
        sandbox="in-process",
        network=network,
        duration_ms=(time.perf_counter() - started) * 1000,
    )
    run.error_type = error_type
    if record:
        run.save()
    return run


# --- fetch_webpage --------------------------------------------------------------------------------------------


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


# --- web_search -----------------------------------------------------------------------------------------------


def web_search(
    *,
    secrets: dict,
    query: str,
    num_results: int = 10,
    category: str | None = None,
    include_text: bool = False,
    include_domains: list[str] | None = None,
    exclude_domains: list[str] | None = None,
    start_published_date: str | None = None,
    end_published_date: str | None = None,
    user_location: str | None = None,
) -> str:
    """Search with the configured provider (HTTP, up to WEB_TOOLS_TIMEOUT_S) and return Letta's JSON text; a
    provider's failure is Letta's `{"query", "error": "Search failed: …"}`, WebToolError when none is configured
    or the agent's SearXNG URL is refused by the egress guard."""
    if not query.strip():
        return json.dumps({"error": "Query cannot be empty", "query": query})
    provider, credential, agents_own = _search_provider(secrets)
    count = min(max(num_results or 10, 1), 100)
    filters = {
        "category": category,
        "include_domains": include_domains or [],
        "exclude_domains": exclude_domains or [],
        "start_published_date": start_published_date,
        "end_published_date": end_published_date,
    }
    try:
        if provider == "exa":
            results = _exa_search(credential, query, count, include_text, user_location, filters)
        else:
            results = _searxng_search(credential, query, count, filters, guarded=agents_own)
    except EgressRefused as exc:
        raise WebToolError(f"web_search: the agent's SEARXNG_URL was not reached: {exc}", "EgressRefused") from None
    except (httpx.HTTPError, ValueError) as exc:
        return json.dumps({"query": query, "error": f"Search failed: {exc}"})
    return json.dumps({"query": query, "results": results}, indent=2, ensure_ascii=False)


def _search_provider(secrets: dict) -> tuple[str, str, bool]:
    """("exa", key, …) or ("searxng", base URL, …), and whether it is the agent's own: the agent's secrets first,
    then the server's settings."""
    server = {"EXA_API_KEY": settings.EXA_API_KEY, "SEARXNG_URL": settings.SEARXNG_URL}
    for source, agents_own in ((secrets, True), (server, False)):
        if str(source.get("EXA_API_KEY") or "").strip():
            return "exa", str(source["EXA_API_KEY"]).strip(), agents_own
        if str(source.get("SEARXNG_URL") or "").strip():
            return "searxng", str(source["SEARXNG_URL"]).strip(), agents_own
    raise WebToolError(
        "web_search has no search provider: set EXA_API_KEY (Exa) or SEARXNG_URL (a SearXNG instance with its JSON "
        "format enabled) in the server's environment, or as one of the agent's secrets.",
        "ValueError",
    )


def _exa_search(key: str, query: str, count: int, include_text: bool, location: str | None, filters: dict) -> list:
    """Exa's `/search` with contents, as Letta's `search_and_contents` asks for them."""
    body = {
        "query": query,
        "numResults": count,
        "type": "auto",
        "contents": {
            "text": bool(include_text),
            "highlights": {"numSentences": 2, "highlightsPerUrl": 3, "query": query},
            "summary": {"query": f"Summarize the key information from this content related to: {query}"},
        },
    }
    optional = {
        "category": filters["category"],
        "includeDomains": filters["include_domains"],
        "excludeDomains": filters["exclude_domains"],
        "startPublishedDate": filters["start_published_date"],
        "endPublishedDate": filters["end_published_date"],
        "userLocation": location,
    }
    body.update({k: v for k, v in optional.items() if v})
    timeout = float(settings.WEB_TOOLS_TIMEOUT_S)
    with httpx.Client(timeout=timeout) as client:
        response = client.post(
            settings.EXA_API_URL.rstrip("/") + "/search",
            json=body,
            headers={"x-api-key": key, "User-Agent": USER_AGENT},
        )
        response.raise_for_status()
        found = response.json().get("results") or []
    results = []
    for item in found:
        result = {
            "title": item.get("title"),
            "url": item.get("url"),
            "published_date": item.get("publishedDate"),
            "author": item.get("author"),
        }
        if include_text and item.get("text"):
            result["text"] = item["text"]
        if item.get("highlights"):
            result["highlights"] = item["highlights"]
        if item.get("summary"):
            result["summary"] = item["summary"]
        results.append(result)
    return results


def _searxng_search(base_url: str, query: str, count: int, filters: dict, *, guarded: bool) -> list:
    """SearXNG's `/search?format=json`: a category it has, domains and dates filtered on the results (its engines
    take no such filters); `include_text` and `user_location` are Exa's only. The agent's own URL goes through
    the egress guard; the operator's is the deployment's endpoint."""
    include, exclude = filters["include_domains"], filters["exclude_domains"]
    q = f"{query} site:{include[0]}" if len(include) == 1 else query
    params = {"q": q, "format": "json"}
    if filters["category"] in _SEARXNG_CATEGORIES:
        params["categories"] = _SEARXNG_CATEGORIES[filters["category"]]
    timeout = float(settings.WEB_TOOLS_TIMEOUT_S)
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    client = (
        guarded_client(timeout=timeout, headers=headers) if guarded else httpx.Client(timeout=timeout, headers=headers)
    )
    results: list[dict] = []
    with client:
        for page in range(1, _SEARXNG_MAX_PAGES + 1):
            response = client.get(base_url.rstrip("/") + "/search", params={**params, "pageno": page})
            if response.status_code == 403:
                raise ValueError("SearXNG answered 403: enable the json format (search.formats in its settings.yml)")
            response.raise_for_status()
            found = response.json().get("results") or []
            for item in found:
                if _searxng_keeps(item, include, exclude, filters) and all(
                    r["url"] != item.get("url") for r in results
                ):
                    results.append(_searxng_result(item))
            if not found or len(results) >= count:
                break
    return results[:count]


def _searxng_result(item: dict) -> dict:
    result = {
        "title": item.get("title"),
        "url": item.get("url"),
        "published_date": item.get("publishedDate"),
        "author": item.get("author"),
    }
    if item.get("content"):
        result["highlights"] = [item["content"]]
    return result


def _searxng_keeps(item: dict, include: list[str], exclude: list[str], filters: dict) -> bool:
    host = (urlsplit(item.get("url") or "").hostname or "").lower()
    on = lambda domain: host == domain.lower().strip(".") or host.endswith("." + domain.lower().strip("."))  # noqa: E731
    if include and not any(on(d) for d in include):
        return False
    if any(on(d) for d in exclude):
        return False
    published = _date(item.get("publishedDate"))
    if published is None:
        return True
    start, end = _date(filters["start_published_date"]), _date(filters["end_published_date"])
    return (start is None or published >= start) and (end is None or published <= end)


def _date(value) -> datetime | None:
    """A date for comparing (naive, day precision is enough for a filter); None if absent or unreadable."""
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).replace(tzinfo=None) if value else None
    except ValueError:
        return None
