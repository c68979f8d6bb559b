"""The Tests tab of the agent workspace: list, write, edit and delete an agent's regression tests, draft one from
the conversation, run them and show the results (refreshed live from the agent's websocket events)."""

import json

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.template.response import TemplateResponse
from django.utils.datastructures import MultiValueDict
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import retarget, trigger_client_event

from core import providers, selectors
from core.agents import agent_tests
from core.errors import DomainError, Invalid, NotFound
from core.evals import agent_tests as test_runs
from core.text import JSONTooDeep, json_input
from core.web.common import agent_or_404, org

TEXT_KINDS = ("contains", "matches", "equals")
LIMITS = (("max_steps", int), ("max_prompt_tokens_per_step", int), ("max_cost_usd", float))


def _json_arg(text: str, what: str):
    try:
        return json_input(text)
    except JSONTooDeep as exc:
        raise Invalid(f"{what} is nested deeper than {exc.max_depth} levels.") from None
    except ValueError as exc:
        raise Invalid(f"{what} is not valid JSON: {exc}") from None


def expect_from_form(data) -> dict:
    """The expectations object from the Tests form (the common fields, or the raw JSON when that editor is used)."""
    if data.get("editor") == "json":
        expect = _json_arg(data.get("expect_json") or "{}", "The expectations JSON")
        if not isinstance(expect, dict):
            raise Invalid("The expectations JSON must be an object.")
        return expect
    expect: dict = {}
    calls = []
    for name, args in zip(data.getlist("tool_name"), data.getlist("tool_args"), strict=False):
        if name.strip():
            call = {"name": name.strip()}
            if args.strip():
                call["args"] = _json_arg(args, f"The argument matchers of {name.strip()}")
                if not isinstance(call["args"], dict):
                    raise Invalid(f"The argument matchers of {name.strip()} must be a JSON object.")
            calls.append(call)
    if calls:
        expect["tools"] = {"calls": calls, "order": data.get("tools_order") or "sequence"}
    if data.get("reply_text"):
        expect["reply"] = {data.get("reply_kind") or "contains": data["reply_text"]}
    blocks = [
        {"label": label.strip(), kind: text}
        for label, kind, text in zip(
            data.getlist("block_label"), data.getlist("block_kind"), data.getlist("block_text"), strict=False
        )
        if label.strip()
    ]
    if blocks:
        expect["blocks"] = blocks
    if data.get("archival_matches"):
        expect["archival"] = {"matches": data["archival_matches"]}
    if data.get("stop_reason", "").strip():
        expect["stop_reason"] = data["stop_reason"].strip()
    for key, cast in LIMITS:
        if str(data.get(key) or "").strip():
            try:
                expect[key] = cast(data[key])
            except ValueError:
                raise Invalid(f"{key.replace('_', ' ')} must be a number.") from None
    return expect


def test_from_form(data) -> dict:
    step_id = (data.get("start_step") or "").strip()
    return {
        "id": data.get("id") or None,
        "name": data.get("name", ""),
        "turns": [t for t in data.getlist("turn") if t.strip()],
        "expect": expect_from_form(data),
        "start": {"step_id": step_id or None, "before": data.get("start_before") == "on"},
    }


def _of(value, kind: type):
    """`value` if it is a `kind`, else an empty one."""
    return value if isinstance(value, kind) else kind()


def _form_rows(expect: dict) -> dict:
    """The form fields for an expectations object; `fits` is False when the form cannot hold all of it. The object
    may be one the service refused (shown again with the reason): any part of it may have the wrong type."""
    tools = _of(expect.get("tools"), dict)
    calls = [
        {"name": c.get("name", ""), "args": json.dumps(c["args"]) if c.get("args") else ""}
        for c in _of(tools.get("calls"), list)
        if isinstance(c, dict)
    ]
    blocks = []
    for b in _of(expect.get("blocks"), list):
        kind = next((k for k in TEXT_KINDS if isinstance(b, dict) and k in b), "contains")
        blocks.append(
            {
                "label": b.get("label", "") if isinstance(b, dict) else "",
                "kind": kind,
                "text": b.get(kind, "") if isinstance(b, dict) else "",
            }
        )
    reply = expect.get("reply") if isinstance(expect.get("reply"), dict) else {}
    reply_kind = next(iter(reply), "contains")
    rows = {
        "calls": calls + [{"name": "", "args": ""}] * 2,
        "order": tools.get("order", "sequence"),
        "blocks": blocks + [{"label": "", "kind": "contains", "text": ""}],
        "reply_kind": reply_kind,
        "reply_text": reply.get(reply_kind, ""),
        "archival": (expect.get("archival") or {}).get("matches", "")
        if isinstance(expect.get("archival"), dict)
        else "",
        "stop_reason": expect.get("stop_reason", ""),
        **{key: expect.get(key, "") for key, _ in LIMITS},
    }
    try:
        back = expect_from_form(
            MultiValueDict(
                {
                    "tool_name": [c["name"] for c in calls],
                    "tool_args": [c["args"] for c in calls],
                    "tools_order": [rows["order"]],
                    "reply_kind": [reply_kind],
                    "reply_text": [rows["reply_text"]],
                    "block_label": [b["label"] for b in blocks],
                    "block_kind": [b["kind"] for b in blocks],
                    "block_text": [b["text"] for b in blocks],
                    "archival_matches": [rows["archival"]],
                    "stop_reason": [rows["stop_reason"]],
                    **{key: [str(rows[key])] for key, _ in LIMITS},
                }
            )
        )
        rows["fits"] = back == expect
    except (Invalid, TypeError, AttributeError):
        rows["fits"] = False
    return rows


def _editor(request, agent, test: dict, *, error: str = "", editor: str = "", status: int = 200, source: str = ""):
    rows = _form_rows(test.get("expect") or {})
    return TemplateResponse(
        request,
        "core/_test_form.html",
        {
            "agent": agent,
            "test": test,
            "rows": rows,
            "error": error,
            "source": source,
            "editor": editor or ("form" if rows["fits"] else "json"),
            "expect_json": json.dumps(test.get("expect") or {}, indent=2),
            "turns": (test.get("turns") or []) + [""],
            "runs": selectors.agent_runs_recent(agent=agent, limit=15),
            "kinds": TEXT_KINDS,
        },
        status=status,
    )


@login_required
@require_GET
def tests_panel(request, agent_id: str):
    """The agent's tests, each with Run, Edit and Delete."""
    agent = agent_or_404(request, agent_id)
    return TemplateResponse(request, "core/_tests.html", {"agent": agent, "tests": agent_tests.tests_list(agent=agent)})


@login_required
@require_GET
def test_form(request, agent_id: str):
    """The editor: a new test, an existing one (?test=ID), or one drafted from the conversation shown
    (?from=conversation: the agent's own thread, or the conversation ?conversation=ID) or from a run (?run=ID)."""
    agent = agent_or_404(request, agent_id)
    if request.GET.get("test"):
        test = next((t for t in agent_tests.tests_list(agent=agent) if t["id"] == request.GET["test"]), None)
        if test is None:
            raise Http404("no such test")
        return _editor(request, agent, test)
    run_id = request.GET.get("run") or request.GET.get("draft_run") or None
    if request.GET.get("from") == "conversation" or run_id:
        conversation = request.GET.get("conversation") or None
        try:
            draft = agent_tests.test_propose(agent=agent, run_id=run_id, conversation_id=conversation)
        except NotFound as exc:
            raise Http404(str(exc)) from exc
        response = _editor(request, agent, draft, source=run_id or "conversation")
        response.context_data["conversation"] = conversation or ""
        return response
    return _editor(request, agent, {"name": "", "turns": [], "expect": {}})


@login_required
@require_GET
def test_form_row(request, agent_id: str):
    """One more empty row of the editor (?kind=turn, call or block; ?n=its number) and the button for the next."""
    agent = agent_or_404(request, agent_id)
    kind = request.GET.get("kind")
    if kind not in ("turn", "call", "block"):
        raise Http404("no such row")
    n = int(request.GET["n"]) if request.GET.get("n", "").isdigit() else 1
    n = min(n, 1000)
    context = {"agent": agent, "kind": kind, "n": n, "next": n + 1, "added": True, "kinds": TEXT_KINDS}
    return TemplateResponse(request, "core/_test_form_more.html", context)


@login_required
@require_POST
def test_save(request, agent_id: str):
    """Save the test from the editor; a refused test comes back in the editor with the reason, as a 422 (the form
    opts in to htmx swapping it: data-swap-refusals in static/ide/agent_tests.js)."""
    agent = agent_or_404(request, agent_id)
    try:
        saved = agent_tests.test_save(agent=agent, test=test_from_form(request.POST))
    except NotFound as exc:  # the agent was deleted since the lookup above
        raise Http404(str(exc)) from exc
    except Invalid as exc:
        draft = {
            "id": request.POST.get("id"),
            "name": request.POST.get("name", ""),
            "turns": [t for t in request.POST.getlist("turn") if t.strip()],
            "expect": _lenient_expect(request.POST),
            "start": {"step_id": request.POST.get("start_step"), "before": request.POST.get("start_before") == "on"},
        }
        response = _editor(
            request,
            agent,
            draft,
            error=exc.message,
            editor=request.POST.get("editor", ""),
            source=request.POST.get("source", "")[:64],
            status=422,
        )
        if request.POST.get("editor") == "json":
            response.context_data["expect_json"] = request.POST.get("expect_json", "")
        return retarget(response, "#test-editor")
    response = TemplateResponse(request, "core/_test_saved.html", {"test": saved})
    return trigger_client_event(response, "tests-changed")


def _lenient_expect(data) -> dict:
    try:
        return expect_from_form(data)
    except Invalid:
        return {}


@login_required
@require_POST
def test_delete(request, agent_id: str):
    """Delete a test (its id in the form: ids from imported agent files may hold any character)."""
    agent = agent_or_404(request, agent_id)
    try:
        tests = agent_tests.test_delete(agent=agent, test_id=request.POST.get("test_id", ""))
    except NotFound as exc:
        raise Http404(str(exc)) from exc
    return TemplateResponse(request, "core/_tests.html", {"agent": agent, "tests": tests})


@login_required
@require_POST
def tests_run(request, agent_id: str):
    """Start a background run of one test (test_id) or all, optionally on another model and keeping the copies."""
    agent = agent_or_404(request, agent_id)
    owner = org(request)
    model = request.POST.get("model", "").strip() or None
    try:
        if model:
            providers.model_resolve(owner=owner, handle=model)
        run = test_runs.tests_start(
            owner=owner,
            agent=agent,
            test_ids=request.POST.getlist("test_id") or None,
            model=model,
            keep=request.POST.get("keep") == "on",
        )
    except DomainError as exc:
        return TemplateResponse(request, "core/_test_run_error.html", {"error": exc.message})
    return _results(request, agent, run)


@login_required
@require_GET
def test_results(request, agent_id: str, run_id: str):
    """One test run's results so far (the tab re-reads this when the websocket says a test finished)."""
    agent = agent_or_404(request, agent_id)
    try:
        run = agent_tests.test_run_get(agent=agent, run_id=run_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc
    return _results(request, agent, run)


def _shown(value) -> str:
    """A value as the results show it: text as is, a list one compact item per line (tool calls read as calls)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_call(v) if isinstance(v, dict) and "name" in v else _shown(v) for v in value) or "(none)"
    if isinstance(value, dict) and "name" in value:
        return _call(value)
    return json.dumps(value, ensure_ascii=False)


def _call(call: dict) -> str:
    args = call.get("arguments") if "arguments" in call else call.get("args")
    return f"{call['name']}({json.dumps(args, ensure_ascii=False) if args else ''})"


def _results(request, agent, run):
    out = agent_tests.test_run_out(run)
    names = {t["id"]: t["name"] for t in agent_tests.tests_list(agent=agent)}
    done = {r["test_id"]: r for r in out["results"]}
    rows = []
    for test_id in out["test_ids"]:
        r = done.get(test_id)
        failures = [
            {
                **f,
                "expected_text": _shown(f.get("expected")),
                "actual_text": _shown(f.get("actual")),
                "missing_text": _shown(f["missing"]) if f.get("missing") is not None else "",
            }
            for f in (r or {}).get("failures") or []
        ]
        rows.append(
            {
                "test_id": test_id,
                "name": (r or {}).get("name") or names.get(test_id, test_id),
                "result": r,
                "failures": failures,
            }
        )
    return TemplateResponse(
        request,
        "core/_test_results.html",
        {"agent": agent, "run": out, "rows": rows, "finished": out["status"] not in ("created", "running")},
    )
