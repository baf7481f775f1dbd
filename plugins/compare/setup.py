"""The native parts of probe-compare, all optional (where no C compiler is found the build skips them):

* ``probe_compare._flat``, the compare's reader of a decoded flat entry into its compact form's key and
  statistics; without it ``probe_compare.columnar._flat`` reads it in Python;
* ``probe_compare._facts``, the judge's measure of a plain entry's discrepancies (its worst input, parameter
  and output); without it ``probe_compare.judge._spread`` measures them in Python.

Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("probe_compare._flat", ["src/probe_compare/_flat.c"], extra_compile_args=["-O2"], optional=True),
    Extension("probe_compare._facts", ["src/probe_compare/_facts.c"], extra_compile_args=["-O2"], optional=True),
])
