"""The impure half of the agent runtime, split by job; `core.runner` orchestrates them."""
