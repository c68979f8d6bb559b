"""Tool sandboxes: one module per backend beside the abstract `base.py`; `selection.py` picks a tool's."""
