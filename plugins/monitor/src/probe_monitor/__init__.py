"""probe-monitor: a low-overhead training-state monitor and ``probe monitor compare``.

``from probe_torch import TrainerMon`` (or ``probe_mindspore``), or ``probe run --task monitor`` on an
unmodified script. Importing this package imports no framework; see the distribution's README.
"""

from __future__ import annotations

__all__: list[str] = []
