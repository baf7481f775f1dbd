"""The one native part of probe-core: the optional one-pass statistics kernel (``probe_core.collect._fused``).

Everything else is declared in pyproject.toml. The extension is optional: where no C compiler is found the
build skips it, and statistics come from the framework's own reductions (``probe_core.collect.fused``).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("probe_core.collect._fused", ["src/probe_core/collect/_fused.c"],
                             extra_compile_args=["-O3"], optional=True)])
