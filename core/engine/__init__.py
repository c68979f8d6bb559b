"""The pure agent engine: types, token counting, context compiler, tool rules, step decisions, memory edits.

No Django here. `llm.py` is the only module that imports litellm (lazily).
"""
