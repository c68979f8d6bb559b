"""Folders of files (Letta's folders, once "sources"): upload, parse, chunk, embed, attach to agents, open and search."""
