"""The core app's REST endpoints (Letta v1 paths), one module per resource. Entry points: they may import any layer below."""
