"""The native parts of probe-core, all optional (where no C compiler is found the build skips them):

* the one-pass statistics kernel (``probe_core.collect._fused``); without it statistics come from the
  framework's own reductions (``probe_core.collect.fused``);
* the dump scanner (``probe_core.dump._scan``), which reads the flat entries of a statistics dump.json
  without building their values; without it every entry is decoded (``probe_core.dump.jsonstream``);
* ``probe_core._reprs``, repr() of many floats at once from msgspec's text of them, CSV rows joined from columns
  of cells (the compare's CSV) and the graph viewer's input/output tables; without it each float is repr()'s
  (``probe_core.fastjson.float_texts``) and the rows are joined by ``str.join`` (probe-compare's
  ``output.join_rows``).

Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("probe_core.collect._fused", ["src/probe_core/collect/_fused.c"], extra_compile_args=["-O3"],
              optional=True),
    Extension("probe_core.dump._scan", ["src/probe_core/dump/_scan.c"], extra_compile_args=["-O2"], optional=True),
    Extension("probe_core._reprs", ["src/probe_core/_reprs.c"], extra_compile_args=["-O2"], optional=True),
])
