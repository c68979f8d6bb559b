"""The card of a run that waits for someone (core.runs.waits), as the workspace's conversation shows it. A wait on
a reply's calls (an approval, a client-side tool, a tool-call breakpoint: core/_wait_calls.html) shows each waiting
call with its arguments to edit, Approve and Deny (at a breakpoint also Step and Stop), the calls that run with the
answers and until when it waits; a wait before a model call (a breakpoint: core/_wait_model_call.html) shows why,
the prompt's tokens, Continue, Step and Stop. Once answered, cancelled or expired a card shows what was decided. The
page draws each card after a reload and live, and a card reads itself again when the wait may have ended (204 while
it still waits as the page shows it); a refused answer is told apart here: answered first elsewhere (another tab, the API) or refused for its own sake."""

import json

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from core.agents import run_view
from core.agents.messages import APPROVAL_RESPONSE, ASSISTANT_TOOL
from core.agents.presenters import wait_out
from core.errors import Conflict, DomainError
from core.models import RUN_ACTIVE, Message, Run
from core.runs import executor, waits
from core.runs.persistence import thread_view
from core.runs.request import RunRequest
from core.web.common import agent_or_404

ALREADY_ANSWERED = "ALREADY_ANSWERED"
_ENDED = {
    "cancelled": "Cancelled: the waiting calls were denied.",
    waits.EXPIRED: "Expired: nobody answered in time, so the waiting calls were denied.",
}
_ENDED_MODEL_CALL = {
    "cancelled": "Stopped: the run ended here without calling the model.",
    waits.EXPIRED: "Expired: nobody let it go on in time, so the run ended here.",
}


def _pretty(arguments) -> str:
    """A call's arguments as indented JSON, without `thinking` (shown as the reasoning above the card)."""
    if isinstance(arguments, dict):
        value = arguments
    else:
        try:
            value = json.loads(arguments or "{}")
        except (TypeError, ValueError):
            return str(arguments or "")
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "thinking"}
    return json.dumps(value, indent=2, ensure_ascii=False)


def _answers(first) -> str | None:
    """The run whose wait a run's first input answers (`wait_run_id`; `resumes` in runs stored before it was renamed)."""
    return (first.get("wait_run_id") or first.get("resumes")) if isinstance(first, dict) else None


def answering_run(*, agent_id: str, wait_run_id: str) -> Run | None:
    """The run in progress that answers this wait (its answer is being run; the wait is taken when it commits)."""
    for run in Run.objects.filter(agent_id=agent_id, status__in=RUN_ACTIVE).only("id", "input_messages"):
        first = (run.input_messages or [{}])[0]
        if _answers(first) == wait_run_id:
            return run
    return None


def _decision(answer: dict | None, tool_row: Message | None, ended_by: str) -> dict:
    """What was decided for one waiting call: from the stored answer, else from its tool result (cancel, expiry)."""
    if answer is not None and answer.get("type") == "tool":
        return {"verdict": "returned", "status": answer.get("status") or "success"}
    if answer is not None and answer.get("approve"):
        if answer.get("arguments") is not None:
            return {"verdict": "approved_edited", "arguments": _pretty(answer["arguments"])}
        return {"verdict": "approved"}
    if answer is not None:
        return {"verdict": "denied", "reason": answer.get("reason")}
    if tool_row is not None:
        return {"verdict": ended_by if ended_by in _ENDED else "denied", "reason": None}
    return {"verdict": "unknown"}


def _said(call: dict, answer: dict | None) -> str | None:
    """The agent's reply when the call approved was its send_message (with the person's edit, if any): the reply
    lives only in this card, the waiting reply never lists as an assistant_message."""
    if call["name"] != ASSISTANT_TOOL or call["decision"]["verdict"] not in ("approved", "approved_edited"):
        return None
    args = (answer or {}).get("arguments")
    if not isinstance(args, dict):
        try:
            args = json.loads(call["raw"] or "{}") if isinstance(call["raw"], str) else call["raw"]
        except ValueError:
            return None
    return str(args["message"]) if isinstance(args, dict) and "message" in args else None


def calls_card(*, reply: Message) -> dict:
    """The card of an assistant message whose calls waited: its state (waiting, answering, answered, cancelled,
    expired, ended), each waiting call (name, pretty arguments, why it waits, what was decided) and the reply's
    other calls (deferred: they run with the answers). Reads the run that waited and, once it no longer waits, the
    stored answer and the calls' tool results."""
    waited = (reply.tool_return or {}).get("waiting") or {}
    calls = [c for c in reply.tool_calls or [] if isinstance(c, dict)]
    card = {
        "id": reply.id,
        "run_id": reply.run_id,
        "calls": [
            {
                "tool_call_id": c.get("id"),
                "name": c.get("name"),
                "arguments": _pretty(c.get("arguments")),
                "raw": c.get("arguments"),
                "why": why,
            }
            for c in calls
            if (why := waited.get(c.get("id")))
        ],
        "deferred": [{"tool_call_id": c.get("id"), "name": c.get("name")} for c in calls if c.get("id") not in waited],
    }
    for call in card["calls"]:
        call["rows"] = min(max(call["arguments"].count("\n") + 1, 2), 14)
    card["call_ids"] = " ".join(c["tool_call_id"] or "" for c in card["calls"])
    card["post"] = reverse("agent_wait_calls", args=[reply.agent_id, reply.id])
    card["approvable"] = any(c["why"] != "client" for c in card["calls"])
    # a tool-call breakpoint (the debugger's): Step and Stop beside Approve and Deny; a client's call is not stepped
    stopped_at = [c["name"] for c in card["calls"] if c["why"] == "breakpoint"]
    card["breakpoint"] = bool(stopped_at) and all(c["why"] != "client" for c in card["calls"])
    card["stopped_at"] = ", ".join(dict.fromkeys(n or "?" for n in stopped_at))
    run = Run.objects.filter(pk=reply.run_id).first() if reply.run_id else None
    wait = wait_out(run) if run is not None else None
    if wait is not None and wait.get("message_id") == reply.id:
        answering = answering_run(agent_id=reply.agent_id, wait_run_id=run.id)
        card.update(
            state="answering" if answering else "waiting",
            answer_run_id=answering.id if answering else None,
            expires_at=run.waiting_until,
        )
        return card
    ids = [c["tool_call_id"] for c in card["calls"]]
    later = Message.objects.filter(agent_id=reply.agent_id, conversation_id=reply.conversation_id, seq__gt=reply.seq)
    response = later.filter(kind=APPROVAL_RESPONSE).order_by("seq").first()
    try:
        answers = {a.get("tool_call_id"): a for a in json.loads(response.text or "[]") if isinstance(a, dict)}
    except (AttributeError, ValueError):
        answers = {}
    if not set(ids) & set(answers):
        answers, response = {}, None  # a later answer, to another reply
    results = {m.tool_call_id: m for m in later.filter(role="tool", tool_call_id__in=ids).order_by("seq")}
    ended_by = run.stop_reason if run is not None else ""
    for call in card["calls"]:
        call["decision"] = _decision(answers.get(call["tool_call_id"]), results.get(call["tool_call_id"]), ended_by)
        call["said"] = _said(call, answers.get(call["tool_call_id"]))
    if response is not None:
        card.update(state="answered", answered_at=response.created_at, answer_run_id=response.run_id)
    elif results and ended_by in _ENDED:
        card.update(state=ended_by, ended_text=_ENDED[ended_by], ended_at=run.completed_at)
    else:
        card.update(state="ended")
    return card


def calls_item(*, reply: Message, item: dict | None = None) -> dict:
    """The history item of a reply's approval request with its card (`item`: the page's own, with its context-window
    mark; without one, the mark is read from the thread's window)."""
    if item is None:
        thread = thread_view(reply.agent, reply.conversation_id)
        item = {
            "id": reply.id,
            "seq": reply.seq,
            "date": reply.created_at,
            "step_id": reply.step_id,
            "step_index": run_view.step_numbers_of(step_ids={reply.step_id}).get(reply.step_id),
            "in_context": reply.id in (thread.message_ids or ()),
            "evicted": None,
        }
    return {**item, "card": calls_card(reply=reply)}


def answer_items(answers: list, call_names: dict[str, str]) -> list[dict]:
    """A stored answer's lines for the conversation: which call, and approved, edited, denied or a client's result."""
    out = []
    for a in answers if isinstance(answers, list) else []:
        if not isinstance(a, dict):
            continue
        name = call_names.get(a.get("tool_call_id")) or a.get("tool_call_id") or "?"
        decision = _decision(a, None, "")
        out.append({"name": name, **decision})
    return out


@login_required
def calls_card_view(request, agent_id: str, message_id: str):
    """One card of a wait on calls as it stands now (the conversation fetches it when a run waits and when a wait
    ends); a POST is the card's form, the person's answer (`calls_answer`)."""
    agent = agent_or_404(request, agent_id)
    reply = Message.objects.filter(pk=message_id, agent=agent, role="assistant").first()
    if reply is None or not (reply.tool_return or {}).get("waiting"):
        raise Http404("no such approval request")
    if request.method == "POST":
        return calls_answer(request, agent=agent, reply=reply)
    item = calls_item(reply=reply)
    if _still_waiting(request, item["card"]):
        return HttpResponse(status=204)
    return TemplateResponse(request, "core/_wait_calls.html", {"agent": agent, "item": item})


def _still_waiting(request, card: dict) -> bool:
    """A card read again (its hx-get: `shown`, the state the page shows; `error`, a refusal it says) that still
    waits, as the page shows it: 204, the page keeps its card and what is being typed in it. Otherwise the card is
    drawn again, still saying the refusal."""
    if request.GET.get("shown") == "waiting" and card["state"] == "waiting":
        return True
    card["error"] = request.GET.get("error", "")[:500] or None
    return False


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _answers_from(post, card: dict, fallback: str | None) -> list | None:
    """The card's form as Letta's approvals (one per waiting call; `fallback`: the choice of a call not chosen, Step
    approves it), arguments sent only when edited; None when a call is unanswered or its arguments are not a JSON
    object, each told on its call (the card keeps what was typed)."""
    out, wrong = [], False
    for call in card["calls"]:
        cid = call["tool_call_id"]
        choice = post.get(f"choice:{cid}") or fallback
        reason = post.get(f"reason:{cid}", "").strip()[:2000]
        typed = post.get(f"arguments:{cid}")
        call.update(typed=typed, reason_typed=reason, choice=choice)
        answer = {"type": "approval", "tool_call_id": cid, "approve": choice == "approve", "reason": reason or None}
        if choice not in ("approve", "deny"):
            card["error"], wrong = "Choose Approve or Deny for each call, then send the answers together.", True
        elif choice == "approve" and typed is not None:
            try:
                value = json.loads(typed)
            except ValueError as exc:
                call["args_error"], wrong = f"The arguments are not valid JSON: {exc}", True
                continue
            if not isinstance(value, dict):
                call["args_error"], wrong = 'The arguments must be a JSON object, such as {"name": "value"}.', True
            elif value != _loads(call["arguments"]):
                answer["arguments"] = value
        out.append(answer)
    return None if wrong else out


def calls_answer(request, *, agent, reply: Message):
    """The person's answer from a card of waiting calls: its form says each call's choice, arguments and reason, and
    `go` (absent: the answers; at a breakpoint `step` or `stop`). Answers with the card as it stands then (its answer
    running, or stopped); a refusal is a 422 with the card and why: the answer as typed while it still waits, else
    what was decided (answered first in another tab or over the API, cancelled, expired)."""
    item = calls_item(reply=reply)
    card, go = item["card"], request.POST.get("go") or "answer"
    answers = None if go == "stop" else _answers_from(request.POST, card, "approve" if go == "step" else None)
    if answers is None and go != "stop":
        return TemplateResponse(request, "core/_wait_calls.html", {"agent": agent, "item": item}, status=422)
    error = None
    if go == "answer":
        answer = {"type": "approval", "approvals": answers}
        request_ = RunRequest(
            owner=agent.owner, agent_id=agent.id, input_messages=[answer], conversation_id=reply.conversation_id
        )
        try:
            executor.run_submit(request_)
        except DomainError as exc:
            error = answer_refused(agent_id=agent.id, thread=reply.conversation_id, message_id=reply.id, exc=exc)
    else:
        error = wait_go_on(owner=agent.owner, agent_id=agent.id, run_id=reply.run_id, approvals=answers, how=go)
    if error is None:
        return TemplateResponse(request, "core/_wait_calls.html", {"agent": agent, "item": calls_item(reply=reply)})
    fresh = calls_item(reply=reply)
    item = item if fresh["card"]["state"] == "waiting" else fresh  # still waiting: the answer as typed
    item["card"]["error"] = error["message"]
    return TemplateResponse(request, "core/_wait_calls.html", {"agent": agent, "item": item}, status=422)


def wait_go_on(*, owner, agent_id: str, run_id: str, how: str, approvals: list | None = None) -> dict | None:
    """A card's Continue, Step or Stop (`how`) on a run's wait (core.runs.executor.wait_answer): None once taken,
    else why not (`run_answer_refused`). A Stop after another tab's Continue was claimed is refused: that was first."""
    if how not in ("continue", "step", "stop"):
        return {"code": "BAD", "message": "Continue, Step or Stop?", "run_id": None}
    if how == "stop" and answering_run(agent_id=agent_id, wait_run_id=run_id) is not None:
        return run_answer_refused(agent_id=agent_id, run_id=run_id, exc=DomainError("Already answered"))
    try:
        executor.wait_answer(owner=owner, run_id=run_id, approvals=approvals, step=how == "step", stop=how == "stop")
    except DomainError as exc:
        return run_answer_refused(agent_id=agent_id, run_id=run_id, exc=exc)
    return None


def answer_refused(*, agent_id: str, thread: str | None, message_id: str | None, exc: DomainError) -> dict:
    """Why an answer sent from a card was refused, for that tab: answered first elsewhere (another tab, the API) or
    ended (cancel, expiry) — code ALREADY_ANSWERED — else the refusal's own text (a wrong id, bad arguments, the
    agent busy in another conversation)."""
    run = None
    if message_id:
        run = (
            Run.objects.filter(agent_id=agent_id, conversation_id=thread, waiting_until__isnull=False)
            .only("id", "waiting")
            .order_by("-created_at")
            .first()
        )
        if run is not None and (run.waiting or {}).get("message_id") != message_id:
            run = None
    answering = answering_run(agent_id=agent_id, wait_run_id=run.id) if run is not None else None
    if message_id and (run is None or answering is not None):
        text = (
            "Not sent: this request was already answered in another tab (or over the API); its answer is being run."
            if answering is not None
            else "Not sent: this request was already answered in another tab (or over the API), cancelled or "
            "expired. The card shows what was decided."
        )
        return {"code": ALREADY_ANSWERED, "message": text, "run_id": answering.id if answering else None}
    detail = exc.detail if isinstance(exc.detail, dict) else {}
    code = "BUSY" if isinstance(exc, Conflict) else detail.get("code")
    return {"code": code, "message": exc.message, "run_id": detail.get("run_id")}


# --------------------------------------------------------------------------- a wait before a model call


def model_call_wait(*, agent) -> Run | None:
    """The run of the agent's thread (`thread_view`) that waits before a model call (a breakpoint), if any."""
    run = (
        Run.objects.filter(
            agent_id=agent.id, conversation_id=getattr(agent, "thread", None), waiting_until__gt=timezone.now()
        )
        .order_by("-created_at")
        .first()
    )
    return run if run is not None and (run.waiting or {}).get("before") == "model_call" else None


def _resumed_by(run: Run) -> Run | None:
    """The run that answered this one's wait (its first input names it: `wait_run_id`)."""
    later = Run.objects.filter(
        agent_id=run.agent_id, conversation_id=run.conversation_id, created_at__gte=run.created_at
    ).exclude(pk=run.pk)
    for other in later.order_by("created_at").only("id", "input_messages", "status")[:20]:
        first = (other.input_messages or [{}])[0]
        if _answers(first) == run.id:
            return other
    return None


def model_call_card(*, run: Run) -> dict:
    """The card of a run that waits before a model call: waiting (why, the prompt's tokens, the breakpoint, until
    when), answering (a Continue or Step is being run), or — once let go — continued or stepped (by which run),
    stopped, expired. Reads the run and, once it no longer waits, the run that resumed it."""
    wait = run.waiting or {}
    card = {
        "run_id": run.id,
        "date": run.created_at,
        "post": reverse("agent_wait_model_call", args=[run.agent_id, run.id]),
    }
    if run.waiting_until is not None:
        answering = answering_run(agent_id=run.agent_id, wait_run_id=run.id)
        point = wait.get("breakpoint") or {}
        card.update(
            state="answering" if answering else "waiting",
            answer_run_id=answering.id if answering else None,
            stepping=(answering.input_messages or [{}])[0].get("step") if answering else False,
            why=wait.get("why") or "",
            tokens=wait.get("tokens"),
            breakpoint=point,
            stepping_hold=point.get("id") == "step",
            since=wait.get("since"),
            expires_at=run.waiting_until,
        )
        return card
    if run.stop_reason in _ENDED_MODEL_CALL:
        card.update(state="stopped" if run.stop_reason == "cancelled" else run.stop_reason)
        card["ended_text"] = _ENDED_MODEL_CALL[run.stop_reason]
        return card
    resumed = _resumed_by(run)
    if resumed is not None:
        first = (resumed.input_messages or [{}])[0]
        card.update(state="stepped" if first.get("step") else "continued", answer_run_id=resumed.id)
    else:
        card.update(state="ended")
    return card


@login_required
def model_call_card_view(request, agent_id: str, run_id: str):
    """One card of a wait before a model call as it stands now (the conversation fetches it when a run waits there
    and when the wait may have ended). 404 for a run that never waited there. A POST is the card's Continue, Step or
    Stop (`go`): the card as it stands then, or a 422 with the card and why it was refused."""
    agent = agent_or_404(request, agent_id)
    run = Run.objects.filter(pk=run_id, agent=agent).first()
    if run is None or (run.waiting_until is not None and (run.waiting or {}).get("before") != "model_call"):
        raise Http404("no such wait")
    if run.waiting_until is None and run.stop_reason not in ("requires_approval", *_ENDED_MODEL_CALL):
        raise Http404("no such wait")
    error = None
    if request.method == "POST":
        error = wait_go_on(owner=agent.owner, agent_id=agent.id, run_id=run.id, how=request.POST.get("go", ""))
        run.refresh_from_db()
    card = model_call_card(run=run)
    if request.method == "GET" and _still_waiting(request, card):
        return HttpResponse(status=204)
    if card["state"] != "waiting":  # once let go, the card keeps saying why it paused (the run no longer stores it)
        card["was"] = request.POST.get("asked", request.GET.get("asked", ""))[:500]
    if error:
        card["error"] = error["message"]
    return TemplateResponse(
        request, "core/_wait_model_call.html", {"agent": agent, "card": card}, status=422 if error else 200
    )


def run_answer_refused(*, agent_id: str, run_id: str, exc: DomainError) -> dict:
    """Why a Continue / Step / Stop sent from a card was refused, for that tab: the run no longer waits or its wait
    is being answered from elsewhere (another tab, the API) — code ALREADY_ANSWERED — else the refusal's own text."""
    run = Run.objects.filter(pk=run_id, agent_id=agent_id).only("id", "waiting_until").first()
    if run is None:
        return {"code": "NOT_FOUND", "message": exc.message, "run_id": None}
    answering = answering_run(agent_id=agent_id, wait_run_id=run.id)
    if answering is not None:
        text = (
            "Not sent: this wait was already answered from another tab (or over the API); "
            f"run …{answering.id[-8:]} is going on from it."
        )
        return {"code": ALREADY_ANSWERED, "message": text, "run_id": answering.id}
    if run.waiting_until is None:
        text = (
            "Not sent: this run no longer waits — it was continued or stopped from another tab (or over the API), or "
            "it expired. The card shows what happened."
        )
        return {"code": ALREADY_ANSWERED, "message": text, "run_id": None}
    detail = exc.detail if isinstance(exc.detail, dict) else {}
    code = "BUSY" if isinstance(exc, Conflict) else detail.get("code")
    return {"code": code, "message": exc.message, "run_id": detail.get("run_id")}
