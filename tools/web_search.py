"""web_search: Exa (Letta's provider, over its public HTTP API) when an `EXA_API_KEY` is configured, else a SearXNG
instance (its JSON API) at `SEARXNG_URL`, for self-hosters. The agent's secrets come first, then the server's
settings, as in Letta. An agent's own SearXNG URL goes through the egress guard; the operator's `EXA_API_URL` and
`SEARXNG_URL` are the deployment's own endpoints, reached directly as provider base URLs are.
"""

from __future__ import annotations

import json
from datetime import datetime
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from core.egress import EgressRefused, guarded_client
from tools.web_fetch import USER_AGENT, WebToolError

_SEARXNG_CATEGORIES = {"news": "news", "research paper": "science", "github": "it"}
_SEARXNG_MAX_PAGES = 3


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
