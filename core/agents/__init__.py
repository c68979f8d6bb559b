"""Agents: their writes, reads, presenters, versions, compiled context and agent files. Imports only core's foundation, memory and tools."""
