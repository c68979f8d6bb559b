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
