"""The workspace's Files pane (attached folders, the agent's files and the windows open in its context now), and the
links from a file tool's result in the conversation to the file viewer at the lines it returned."""

import json
import re

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from core.errors import DomainError
from core.models import Agent, Message
from core.web.common import agent_or_404, org, owned_or_404
from core.web.workspace import definition_ctx
from memory.files import selectors, services
from memory.models import FILE_TERMINAL, Folder, Passage
from tools import services as tool_services

FILE_TOOLS = ("open_files", "grep_files", "semantic_search_files")
GREP_HIT = re.compile(r"^=== (.+):(\d+) ===$", re.MULTILINE)
SEARCH_HIT = re.compile(r"^=== (.+) \(passage #\d+\) ===\n((?:  .*(?:\n|$))+)", re.MULTILINE)


def _pane_ctx(request, agent: Agent, error: str = "") -> dict:
    owner = org(request)
    attached = list(selectors.agent_folders(agent=agent))
    states = {s.file_id: s for s in selectors.agent_file_states(agent=agent)}
    folders = []
    for folder in attached:
        files = selectors.files_timed_out(list(selectors.files_of(folder=folder).order_by("created_at", "id")))
        folders.append({"folder": folder, "files": [{"file": f, "state": states.get(f.id)} for f in files]})
    attached_ids = {f.id for f in attached}
    return {
        "agent": agent,
        "folders": folders,
        "others": [f for f in selectors.folders_of(owner=owner).order_by("name") if f.id not in attached_ids],
        "limits": selectors.file_limits(agent),
        "open_count": sum(s.is_open for s in states.values()),
        "processing": any(x["file"].status not in FILE_TERMINAL for f in folders for x in f["files"]),
        "error": error,
    }


@login_required
def files_panel(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    return TemplateResponse(request, "memory/_agent_files.html", _pane_ctx(request, agent))


def _changed(request, agent: Agent, *, error: str = "", tools: bool = False) -> TemplateResponse:
    """The pane again; the context panel refreshes, and the tools section too (out of band) when attaching or
    detaching changed the file tools."""
    ctx = _pane_ctx(request, agent, error)
    if tools:
        ctx["tools_section"] = definition_ctx(request, agent)
    response = TemplateResponse(request, "memory/_agent_files.html", ctx)
    return response if error else trigger_client_event(response, "context-changed")


@login_required
@require_POST
def folder_attach(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    folder = owned_or_404(request, Folder, request.POST.get("folder_id", ""))
    with transaction.atomic():  # the folder's files and the file tools to read them, together (as the API does)
        services.folder_attach(agent=agent, folder=folder)
        tool_services.file_tools_sync(agent=agent, attached=True)
    return _changed(request, agent, tools=True)


@login_required
@require_POST
def folder_detach(request, agent_id: str, folder_id: str):
    agent = agent_or_404(request, agent_id)
    try:
        with transaction.atomic():  # the last folder takes the file tools with it
            services.folder_detach(agent=agent, folder_id=folder_id)
            if not selectors.agent_folders(agent=agent).exists():
                tool_services.file_tools_sync(agent=agent, attached=False)
    except DomainError as exc:
        return _changed(request, agent, error=exc.message)
    return _changed(request, agent, tools=True)


@login_required
@require_POST
def file_open_close(request, agent_id: str, file_id: str, action: str):
    """Open a file whole in the agent's context (the least recently used closed past its limit), or close it."""
    agent = agent_or_404(request, agent_id)
    if action not in ("open", "close"):
        raise Http404("no such action")
    try:
        if action == "open":
            services.file_open(agent=agent, file_id=file_id)
        else:
            services.file_close(agent=agent, file_id=file_id)
    except DomainError as exc:
        return _changed(request, agent, error=exc.message)
    return _changed(request, agent)


# --------------------------------------------------------------------------- links from the conversation


def _result_text(row: Message) -> str:
    try:
        doc = json.loads(row.text)
    except ValueError:
        return row.text
    return str(doc.get("message", "")) if isinstance(doc, dict) else row.text


def _call_args(agent: Agent, row: Message) -> dict:
    """The arguments of the call this result answers (the assistant message just before it holds the call)."""
    for earlier in Message.objects.filter(agent=agent, role="assistant", seq__lt=row.seq).order_by("-seq")[:10]:
        for call in earlier.tool_calls or []:
            if call.get("id") == row.tool_call_id:
                try:
                    args = json.loads(call.get("arguments") or "{}")
                except ValueError:
                    return {}
                return args if isinstance(args, dict) else {}
    return {}


def _ranges(agent: Agent, row: Message) -> list[tuple]:
    """(file's context name, first line, last line, what it is, the lines a search result showed) for each place
    the result cites."""
    text = _result_text(row)
    if row.name == "grep_files":
        return [(name, int(n), int(n), f"match at line {n}", []) for name, n in GREP_HIT.findall(text)]
    if row.name == "open_files":
        out = []
        for req in _call_args(agent, row).get("file_requests") or []:
            if not isinstance(req, dict) or not isinstance(req.get("file_name"), str):
                continue
            offset, length = req.get("offset"), req.get("length")
            start = offset + 1 if isinstance(offset, int) and offset >= 0 else None
            end = (start or 1) + length - 1 if isinstance(length, int) and length > 0 else None
            label = f"lines {start or 1}–{end}" if end else (f"from line {start}" if start else "whole file")
            out.append((req["file_name"], start, end, f"opened {label}", []))
        return out
    out = []
    for i, (name, block) in enumerate(SEARCH_HIT.findall(text), start=1):
        shown = [line[2:] for line in block.rstrip("\n").split("\n") if not line.startswith("  ... [truncated")]
        out.append((name, None, None, f"passage #{i}", shown))
    return out


def _passage_lines(file, shown: list[str]) -> tuple[int | None, int | None]:
    """The line range of the file's chunk whose text begins with the lines a search result showed."""
    if not shown:
        return None, None
    head = "\n".join(shown)
    for text, meta in Passage.objects.filter(file=file, text__startswith=shown[0]).values_list("text", "metadata"):
        if "\n".join(text.splitlines()[: len(shown)]) == head:
            return meta.get("start_line"), meta.get("end_line")
    return None, None


def file_links(agent: Agent, row: Message) -> list[dict]:
    """Where a file tool's result points: each cited file of the agent's account with the viewer's URL at the
    lines (a file deleted since is listed without a link)."""
    links = []
    for name, start, end, label, shown in _ranges(agent, row):
        folder_name, _, file_name = name.partition("/")
        folder = Folder.objects.filter(owner_id=agent.owner_id, name=folder_name).first()
        file = folder.files.defer("raw", "content").filter(file_name=file_name).first() if folder else None
        if file is not None and shown:
            start, end = _passage_lines(file, shown)
        url = None
        if file is not None:
            url = reverse("file_view", args=[folder.id, file.id])
            if start:
                url += f"?start={start}&end={end or start}#L{start}"
        links.append({"name": name, "label": label, "start": start, "end": end, "url": url})
    return links


@login_required
def tool_result_links(request, agent_id: str, message_id: str):
    """A file tool's result: straight to the viewer when it cites one place, else the list of places."""
    agent = agent_or_404(request, agent_id)
    row = Message.objects.filter(agent=agent, id=message_id, role="tool", name__in=FILE_TOOLS).first()
    if row is None:
        raise Http404("no file tool result with this id")
    links = file_links(agent, row)
    usable = [link for link in links if link["url"]]
    if len(links) == 1 and usable:
        return redirect(usable[0]["url"])
    ctx = {"agent": agent, "row": row, "links": links, "nav": "folders"}
    return TemplateResponse(request, "memory/file_links.html", ctx)
