"""Running agents: the run queue and executor, the runner (`runner.py`) and its runtime (`emit`, `overflow`,
`persistence`, `recall`, `tool_exec`), streaming, multi-agent messaging, sleep-time companions, time travel and
agent tests. Imports core.agents and below; entry points (core.api, core.web) import it."""
