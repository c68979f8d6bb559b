"""The Folders page: an account's folders, a folder's files (upload with progress, processing status polled), and the
viewer of a file's parsed text with its chunks."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core.errors import DomainError, NotFound
from core.runs import queue
from core.web.common import org, owned_or_404
from memory.embedders.selection import embedding_unavailable
from memory.files import selectors, services
from memory.files.ingest import folder_embedding_handle
from memory.files.tasks import file_ingest_task
from memory.models import Folder, FolderFile, Passage

LINES_PAGE = 400  # lines the viewer shows at once (a 300-page PDF has tens of thousands)


class FolderForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, max_length=2000)
    embedding = forms.CharField(
        required=False, max_length=200, help_text="an embedding model handle; empty: the account's default"
    )


def _folder_or_404(request, folder_id: str) -> Folder:
    return owned_or_404(request, Folder, folder_id)


def _file_or_404(folder: Folder, file_id: str) -> FolderFile:
    try:
        return selectors.file_get(folder=folder, file_id=file_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def _folders(request) -> list[Folder]:
    owner = org(request)
    folders = list(
        selectors.folders_of(owner=owner)
        .annotate(file_count=Count("files", distinct=True))
        .prefetch_related("agents")
        .order_by("name", "id")
    )
    default = folder_embedding_handle(Folder(owner=owner))  # what a folder without a model of its own uses, read once
    for f in folders:
        f.embedding_handle = f.embedding or default
    return folders


@login_required
def folders_page(request, form: FolderForm | None = None, status: int = 200):
    ctx = {"folders": _folders(request), "form": form or FolderForm(), "nav": "folders"}
    return TemplateResponse(request, "memory/folders.html", ctx, status=status)


@login_required
@require_POST
def folder_create(request):
    form = FolderForm(request.POST)
    if form.is_valid():
        try:
            folder = services.folder_create(owner=org(request), **form.cleaned_data)
            return redirect("folder", folder.id)
        except DomainError as exc:
            form.add_error("name", exc.message)
    return folders_page(request, form=form, status=400)


def _folder_ctx(request, folder: Folder, rename: FolderForm | None = None) -> dict:
    files = selectors.files_timed_out(list(selectors.files_of(folder=folder).order_by("-created_at", "id")))
    handle = folder_embedding_handle(folder)
    return {
        "folder": folder,
        "files": files,
        "agents": list(folder.agents.order_by("name")),
        "embedding_handle": handle,
        "embedding_problem": embedding_unavailable(owner=folder.owner, handle=handle),
        "rename": rename or FolderForm(initial={"name": folder.name, "description": folder.description}),
        "max_bytes": services.max_file_bytes(),
        "nav": "folders",
    }


@login_required
def folder_page(request, folder_id: str):
    folder = _folder_or_404(request, folder_id)
    return TemplateResponse(request, "memory/folder.html", _folder_ctx(request, folder))


@login_required
@require_POST
def folder_rename(request, folder_id: str):
    folder = _folder_or_404(request, folder_id)
    form = FolderForm(request.POST)
    if form.is_valid():
        try:
            changes = {"name": form.cleaned_data["name"], "description": form.cleaned_data["description"]}
            services.folder_update(folder=folder, changes=changes)
            return redirect("folder", folder.id)
        except DomainError as exc:
            form.add_error("name", exc.message)
    folder.refresh_from_db()
    return TemplateResponse(request, "memory/folder.html", _folder_ctx(request, folder, rename=form), status=400)


@login_required
@require_POST
def folder_delete(request, folder_id: str):
    services.folder_delete(folder=_folder_or_404(request, folder_id))
    return redirect("folders")


def _refused(message: str, status: int) -> HttpResponse:
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


@login_required
@require_POST
def file_upload(request, folder_id: str):
    """One file (multipart field `file`): its row, which polls its processing status; a refusal is plain text."""
    folder = _folder_or_404(request, folder_id)
    upload = request.FILES.get("file")
    if upload is None:
        return _refused("Choose a file to upload.", 400)
    limit = services.max_file_bytes()
    if upload.size > limit:
        return _refused(f"{upload.name} is {upload.size} bytes; files in folders may be at most {limit} bytes.", 413)
    try:
        stored, skipped = services.file_upload(
            folder=folder, file_name=upload.name, content_type=upload.content_type, data=upload.read(limit + 1)
        )
    except DomainError as exc:
        return _refused(exc.message, exc.status)
    if not skipped:
        queue.woken_after_commit(file_ingest_task.enqueue(file_id=stored.id))
    return TemplateResponse(request, "memory/_file_row.html", {"folder": folder, "file": stored}, status=201)


@login_required
def file_row(request, folder_id: str, file_id: str):
    """A file's row as it is now (polled while it processes)."""
    folder = _folder_or_404(request, folder_id)
    return TemplateResponse(request, "memory/_file_row.html", {"folder": folder, "file": _file_or_404(folder, file_id)})


@login_required
@require_POST
def file_delete(request, folder_id: str, file_id: str):
    folder = _folder_or_404(request, folder_id)
    services.file_delete(file=_file_or_404(folder, file_id))
    return HttpResponse("")  # the row is swapped out


def _int(value, default: int | None = None) -> int | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return default
    return n if n >= 1 else default


def _chunks(file: FolderFile) -> list[dict]:
    """The file's chunks as ingest wrote them: index, first and last line and page."""
    rows = Passage.objects.filter(file=file).values_list("metadata", flat=True)
    chunks = [
        {
            "index": m.get("chunk", 0),
            "start_line": m.get("start_line", 0),
            "end_line": m.get("end_line", 0),
            "start_page": m.get("start_page", 1),
            "end_page": m.get("end_page", 1),
        }
        for m in rows
    ]
    return sorted(chunks, key=lambda c: c["index"])


def _viewer_lines(lines, chunks: list[dict], *, first: int, start: int | None, end: int | None) -> list[dict]:
    """The lines shown, each with the chunks starting at it and whether it is in the asked-for range."""
    starting: dict[int, list[dict]] = {}
    for c in chunks:
        starting.setdefault(c["start_line"], []).append(c)
    low, high = (start, end or start) if start else (0, -1)
    out, page = [], None
    for line in lines[first - 1 : first - 1 + LINES_PAGE]:
        out.append(
            {
                "line": line,
                "new_page": line.page if line.page != page and (page is not None or line.page > 1) else None,
                "chunks": starting.get(line.number, []),
                "hit": low <= line.number <= high,
            }
        )
        page = line.page
    return out


@login_required
def file_view(request, folder_id: str, file_id: str):
    """The parsed text as numbered lines (the numbering the file tools cite) with the chunks' boundaries;
    `start`/`end` mark a line range, `from` pages through a long file."""
    folder = _folder_or_404(request, folder_id)
    file = _file_or_404(folder, file_id)
    lines = selectors.file_lines(file) if file.content else []
    start, end = _int(request.GET.get("start")), _int(request.GET.get("end"))
    first = _int(request.GET.get("from")) or max(1, (start or 1) - 5)
    first = min(first, max(1, len(lines)))
    chunks = _chunks(file)
    ctx = {
        "folder": folder,
        "file": file,
        "total": len(lines),
        "shown": _viewer_lines(lines, chunks, first=first, start=start, end=end),
        "chunks": chunks,
        "start": start,
        "end": end or (start if start else None),
        "first": first,
        "last": min(len(lines), first + LINES_PAGE - 1),
        "earlier": max(1, first - LINES_PAGE) if first > 1 else None,
        "later": first + LINES_PAGE if first + LINES_PAGE <= len(lines) else None,
        "nav": "folders",
    }
    return TemplateResponse(request, "memory/file_view.html", ctx)
