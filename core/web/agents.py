"""Agents list: search, tags, running; create from a template; duplicate; delete with confirmation."""

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core import providers, selectors
from core.agents import services
from core.agents.agentfile import templates
from core.errors import DomainError
from core.evals import experiments
from core.web.common import agent_or_404, org
from memory.models import AgentBlock
from memory.selectors import agent_blocks

AGENT_TYPE_CHOICES = [
    ("", "as the template says"),
    ("letta_v1_agent", "letta_v1_agent (Letta's default)"),
    ("memgpt_v2_agent", "memgpt_v2_agent"),
]


class AgentCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    template = forms.ChoiceField(choices=())
    model = forms.CharField(max_length=200, help_text="Pick a configured model or type any litellm handle.")
    agent_type = forms.ChoiceField(
        required=False,
        initial="",
        choices=AGENT_TYPE_CHOICES,
        help_text="Each template states its type. letta_v1_agent replies in plain text; memgpt_v2_agent replies "
        "through send_message and chains steps with heartbeats. Another type than the template's takes that type's "
        "base system prompt.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["template"].choices = templates.agent_templates()


def _models(owner) -> list[dict]:
    return providers.models_list(owner=owner)


def _listed(owner, q: str, tag: str) -> list:
    tags = [tag] if tag else None
    return list(
        selectors.agents_list(owner=owner, query_text=q or None, tags=tags, limit=200, hide_marked=experiments.COPY_KEY)
    )


@login_required
def agents_page(request, form: AgentCreateForm | None = None):
    owner = org(request)
    q = request.GET.get("q") or ""
    tag = request.GET.get("tag") or ""
    agents = _listed(owner, q, tag)
    all_tags = sorted({t.tag for a in agents for t in a.tag_rows.all()} | ({tag} if tag else set()))
    models = _models(owner)

    form = form or AgentCreateForm(
        initial={
            "template": "af:memgpt_chat",
            "agent_type": "",
            "model": models[0]["handle"] if models else settings.DEFAULT_MODEL,
        }
    )
    ctx = {
        "agents": agents,
        "running": selectors.agents_running_ids(owner=owner),
        "q": q,
        "tag": tag,
        "all_tags": all_tags,
        "form": form,
        "models": models,
        "templates": templates.templates_list(),
        "nav": "agents",
    }
    template = "core/_agents_rows.html" if request.htmx and request.htmx.target == "agents-rows" else "core/agents.html"
    return TemplateResponse(request, template, ctx, status=400 if form.errors else 200)


@login_required
def agents_status(request):
    """Running/idle badges of the listed agents, as out-of-band swaps for the list's poller (a read)."""
    owner = org(request)
    agents = _listed(owner, request.GET.get("q") or "", request.GET.get("tag") or "")
    return TemplateResponse(
        request, "core/_agents_status.html", {"agents": agents, "running": selectors.agents_running_ids(owner=owner)}
    )


@login_required
@require_POST
def agent_create(request):
    form = AgentCreateForm(request.POST)
    if form.is_valid():
        try:
            agent = templates.agent_create_from_template(
                owner=org(request),
                template=form.cleaned_data["template"],
                name=form.cleaned_data["name"],
                model=form.cleaned_data["model"],
                agent_type=form.cleaned_data["agent_type"] or None,
            )
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("workspace", agent_id=agent.id)
    request.method = "GET"
    return agents_page(request, form=form)


@login_required
@require_POST
def agent_duplicate(request, agent_id: str):
    copy = services.agent_duplicate(agent=agent_or_404(request, agent_id))
    return redirect("workspace", agent_id=copy.id)


@login_required
def agent_delete(request, agent_id: str):
    """GET shows what deleting removes (and which shared blocks survive); POST deletes."""
    agent = agent_or_404(request, agent_id)
    if request.method == "POST":
        services.agent_delete(agent=agent)
        return redirect("agents")

    blocks = [(b, AgentBlock.objects.filter(block=b).count() > 1) for b in agent_blocks(agent=agent)]
    return TemplateResponse(
        request,
        "core/agent_delete.html",
        {"agent": agent, "blocks": blocks, "messages_count": agent.messages.count(), "nav": "agents"},
    )
