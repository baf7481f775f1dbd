"""The native part of probe-modes, optional (where no C compiler is found the build skips it):
``probe_modes._stats``, the statistics mode's metric columns and discrepancies of many rows at once; without it
numpy computes them (``probe_modes.statistics._metrics_numpy`` and ``_discrepancies_numpy``).

Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("probe_modes._stats", ["src/probe_modes/_stats.c"], extra_compile_args=["-O2", "-ffp-contract=off"],
              optional=True),
])
