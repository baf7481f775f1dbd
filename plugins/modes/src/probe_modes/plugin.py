"""The ``modes`` plugin: registers the data modes (collection side) and their comparators (compare side).

Each hook imports its implementation lazily through the specs' ``load``
callables, so listing plugins stays cheap.
"""

from __future__ import annotations

from probe_core import hookimpl  # noqa: F401  (used by the hook implementations below)


def _loader(module: str):
    """A spec's ``load``: import ``probe_modes.{module}`` only when the mode/comparator is used."""
    def load():
        import importlib

        return importlib.import_module(f"probe_modes.{module}").load()
    return load


# -- collection side (data modes) ---------------------------------------------------


@hookimpl
def probe_data_modes():
    from probe_core.specs import DataModeSpec

    return [
        DataModeSpec("statistics", "statistics", "Max/Min/Mean/Norm per tensor, computed on device, fetched in batches",
                     _loader("collect.statistics")),
        DataModeSpec("md5", "statistics", "statistics plus CRC-32 of the raw bytes (summary_mode md5)",
                     _loader("collect.md5")),
        DataModeSpec("tensor", "tensor", "statistics plus every tensor saved under dump_tensor_data/",
                     _loader("collect.tensor")),
        DataModeSpec("overflow_check", "overflow_check", "only entries whose tensors hold NaN/Inf",
                     _loader("collect.overflow")),
    ]


# -- compare side (comparators) -------------------------------------------------------


@hookimpl
def probe_comparators():
    from probe_core.specs import ComparatorSpec

    return [
        ComparatorSpec("statistics", "statistics", "Max/Min/Mean/Norm diff and relative error",
                       _loader("compare_statistics")),
        ComparatorSpec("md5", "md5", "CRC-32 of both sides (equal or not)", _loader("compare_md5")),
        ComparatorSpec("tensor", "tensor", "Cosine, EucDist, MaxAbsErr, MaxRelativeErr, one/five-thousandth "
                       "error ratios in float64 from the saved tensors", _loader("compare_tensor")),
    ]
