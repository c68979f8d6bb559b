"""Agents: their writes and reads, presenters, versions and restore, compiled context, history and agent files.
Imports only core's foundation modules, memory and tools; core.runs and the entry points import it."""
