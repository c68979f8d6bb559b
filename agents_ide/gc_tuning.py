"""Garbage-collector settings for long-running server processes.

After start-up (Django, litellm and its model tables: hundreds of thousands of objects) those objects are
frozen out of the collector's reach, and the youngest generation is collected less often: a step allocates
many short-lived objects (ORM rows, JSON), and with the defaults full collections rescanned the whole
start-up heap again and again (5% of a busy server's CPU).
"""

import gc

GEN0_THRESHOLD = 20_000


def settle() -> None:
    """Call once the process has imported what it serves with."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
