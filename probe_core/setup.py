"""The native parts of probe-core, both optional (where no C compiler is found the build skips them):

* the one-pass statistics kernel (``probe_core.collect._fused``); without it statistics come from the
  framework's own reductions (``probe_core.collect.fused``);
* the dump scanner (``probe_core.dump._scan``), which reads the flat entries of a statistics dump.json
  without building their values; without it every entry is decoded (``probe_core.dump.jsonstream``).

Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("probe_core.collect._fused", ["src/probe_core/collect/_fused.c"], extra_compile_args=["-O3"],
              optional=True),
    Extension("probe_core.dump._scan", ["src/probe_core/dump/_scan.c"], extra_compile_args=["-O2"], optional=True),
])
