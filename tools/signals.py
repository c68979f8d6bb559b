"""Signals tool writes send to the layers above tools, which connect to them in their AppConfig.ready.

Agent versions (core.agents.versions) record what a tool write changed; they sit above tools, so tools tell
them through these instead of importing them. Sent inside the write's transaction: a receiver's writes commit
or roll back with it.
"""

from django.dispatch import Signal

# An agent's tools, or a deleted tool's agents, changed. Keyword arguments: agents (list[Agent]), message (str).
agent_tools_changed = Signal()

# A tool's code or schema changed. Keyword arguments: tool (Tool).
tool_code_changed = Signal()
