"""The impure half of the agent runtime, split by job; `core.runs.runner` orchestrates them."""
