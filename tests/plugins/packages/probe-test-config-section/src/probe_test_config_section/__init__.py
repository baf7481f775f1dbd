"""A third-party config.json section (plugin ``sampling``): ``{"sampling": {"strategy": ..., "rate": ...}}``."""

from __future__ import annotations

from probe_core.api import ConfigKey, ConfigSectionSpec, hookimpl



def _check_rate(value: float) -> str | None:
    return None if 0 < value <= 1 else f"{value} is outside (0, 1]; give a fraction of the steps, e.g. 0.25"


@hookimpl
def probe_config_sections() -> list[ConfigSectionSpec]:
    return [ConfigSectionSpec("sampling", (
        ConfigKey("strategy", str, "uniform", choices=("uniform", "random"), doc="how steps are picked"),
        ConfigKey("rate", (int, float), 1.0, check=_check_rate, doc="share of the steps to sample"),
    ), description="step sampling (a test plugin's section)")]
