"""The ``modes`` plugin: registers the data modes (collection side) and their comparators (compare side).

Each hook imports its implementation lazily through the specs' ``load``
callables, so listing plugins stays cheap.
"""

from __future__ import annotations

from probe_core import hookimpl  # noqa: F401  (used by the hook implementations below)
