"""`outbox local up`'s collector tuning (outbox_local.collector): in effect while the runtime runs, and the
process's collector as it was after."""

from __future__ import annotations

import gc
import weakref

from outbox_local.collector import OLDER_GENERATIONS, YOUNG_GENERATION, tuned_for_a_long_run


def test_what_is_alive_is_frozen_and_the_young_generation_is_larger_then_all_is_restored() -> None:
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    alive = object()  # noqa: F841 - kept alive across the freeze
    with tuned_for_a_long_run():
        assert gc.get_threshold() == (YOUNG_GENERATION, *OLDER_GENERATIONS)
        assert gc.get_freeze_count() > frozen_before
        assert gc.isenabled()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cyclic_garbage_made_while_tuned_is_still_collected() -> None:
    class Node:
        partner: Node

    with tuned_for_a_long_run():
        first, second = Node(), Node()
        first.partner, second.partner = second, first
        collected = weakref.ref(first)
        del first, second
        assert collected() is not None  # a cycle: reference counting alone never frees it
        gc.collect()
        assert collected() is None
