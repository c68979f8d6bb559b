"""Embedders: one module per backend beside the abstract `base.py`; `selection.py` picks an agent's."""
