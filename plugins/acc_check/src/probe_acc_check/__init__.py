"""probe-acc-check: the offline API pre-check (``probe acc-check``).

Each API call of an L1/mix dump becomes a unit test: run on the device under
test in the recorded dtype and on the CPU in float64, judged by precision
standards (plugins, hook ``probe_acc_standards``). In Python::

    from probe_acc_check import CheckOptions, run_check
    summary = run_check(CheckOptions("dump/step0/rank0", out_path="out"), registry)

Standards judge :class:`OutputCheck` objects and return :class:`Verdict`; framework backends
(hook ``probe_acc_backends``) return a :class:`Run` of two :class:`Outcome` and call only what
:func:`resolve` finds in the collector's operator table.
Names are imported on first use, so that ``probe plugins`` stays light.
"""

from importlib import import_module

_EXPORTS = {"AccCheckError": "errors", "CheckOptions": "runner", "run_check": "runner",
            "OutputCheck": "standards", "Verdict": "standards", "SkipApi": "errors",
            "Options": "backend", "Outcome": "backend", "Output": "backend", "Run": "backend", "resolve": "backend"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'probe_acc_check' has no attribute {name!r}")
    return getattr(import_module(f"probe_acc_check.{_EXPORTS[name]}"), name)
