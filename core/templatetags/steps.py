"""{% numbered steps as steps %}: the steps, each with `.number`, its number among its conversation's agent steps
(None for a summary): how the chips, the inspector and the run graph name a step."""

from django import template

from core.agents import run_view

register = template.Library()


@register.simple_tag
def numbered(steps) -> list[dict]:
    """The steps (rows as dicts, as `agent_steps_recent` reads them) with their `number` within their conversation
    (one query)."""
    steps = list(steps)
    numbers = run_view.step_numbers_of(step_ids={s["id"] for s in steps})
    return [{**s, "number": numbers.get(s["id"])} for s in steps]
