"""Server processes freeze their start-up heap and collect the young generation less often."""

import gc

from agents_ide import gc_tuning


def test_settle_freezes_the_heap_and_raises_the_young_threshold():
    before = gc.get_threshold()
    try:
        gc_tuning.settle()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (gc_tuning.GEN0_THRESHOLD, before[1], before[2])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
