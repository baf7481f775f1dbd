"""Pause Python's cyclic garbage collector while probe builds many small long-lived objects.

A compare's indexes and compact forms, or a graph's nodes, live to the end of the job; the collector would
rescan them over and over as they grow (9% of a 100,000-entry compare). probe's own objects form no cycles
that need collecting meanwhile; the collector runs again as soon as the job is done.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def left_to_exit(value: object) -> None:
    """Leave ``value`` (a job's millions of small objects) to the end of the process, which comes next: held in a
    cycle nothing else reaches and frozen (:func:`gc.freeze`), it is never freed one by one nor scanned by the
    collector, the last pass at exit included. Only for a process that ends after the command
    (``args.process_ends``); a process that goes on would keep the memory."""
    held: list[object] = [value]
    held.append(held)
    gc.freeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off (as it was before, after)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
