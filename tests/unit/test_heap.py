"""operations.heap: the start-up heap is frozen for the block only, and what the block creates is
still collected."""

from __future__ import annotations

import gc
import weakref

from operations.heap import frozen_startup_heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_frozen_for_the_block_only() -> None:
    before = Node()
    gone = weakref.ref(before)
    with frozen_startup_heap():
        assert gc.get_freeze_count() > 0
        del before
        gc.collect()
        assert gone() is not None  # frozen: not collected while the block runs
        inner = weakref.ref(Node())
        gc.collect()
        assert inner() is None  # created in the block: collected as usual
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None
