"""The pure agent engine: types, token counting, context compiler, tool rules, step decisions, memory edits.

No Django, no network: the model client (`core/llm/`) and the JSON encoder other layers use (`core/jsontext.py`) live
outside it.
"""
