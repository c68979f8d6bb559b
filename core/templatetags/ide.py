"""Template filters of the IDE's pages."""

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter
def breakable(name: str) -> SafeString:
    """A snake_case name that may wrap after its underscores (`<wbr>`), not inside its words: a narrow column shows
    `send_message_to_agent_async` whole on two lines instead of cut to the same prefix as its siblings."""
    return mark_safe(escape(name).replace("_", "_<wbr>"))  # noqa: S308 - escaped first; only <wbr> is added


LONG_CHARS = 3000  # a message body longer than this shows collapsed, with its size and Show all


@register.simple_tag
def show_all(text) -> str:
    """The Show all button after a long body (the CSS collapses a body followed by it); nothing for a short one."""
    n = len(text) if isinstance(text, str) else 0
    if n <= LONG_CHARS:
        return ""
    label = f"Show all · {n:,} characters"
    return mark_safe(  # noqa: S308 - no outside text in it
        f'<button type="button" class="small ghost show-all" aria-expanded="false" data-label="{label}">{label}</button>'
    )
