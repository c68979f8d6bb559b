"""The core app's REST endpoints (Letta v1 paths), one module per resource; `agents_ide/api.py` adds their routers.
Entry points: they may import any layer below."""
