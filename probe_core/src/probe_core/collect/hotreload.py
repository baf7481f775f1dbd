"""msprobe's ``dump_enable``: dumping switched on and off from config.json while a run goes on.

When the config holds ``"dump_enable"`` (true or false), the file is watched:
at each step boundary one ``stat()`` tells whether it changed (modification
time and size), and only then is it read again. The new value applies from
the step that begins there; deleting the key keeps the current state, and a
file that no longer parses turns dumping off until it is fixed (as msprobe
does). Other keys are read once, at the start: a change to them is reported,
not applied. Without the key nothing is watched and nothing costs.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from probe_core.config import ProbeConfig, read_config
from probe_core.errors import ConfigError


class DumpSwitch:
    """Whether the step that begins is dumped, as far as ``dump_enable`` decides."""

    def __init__(self, config: ProbeConfig) -> None:
        self.enabled = config.dump_enable is not False
        self.path = config.source if config.dump_enable is not None and os.path.isfile(config.source) else None
        self._signature = self._stat()
        self._others = self._other_keys(read_config(self.path)) if self.path else {}

    def _stat(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self.path)  # type: ignore[arg-type]
        except (OSError, TypeError):
            return None
        return found.st_mtime_ns, found.st_size

    @staticmethod
    def _other_keys(raw: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in raw.items() if key != "dump_enable"}

    def poll(self, step: int) -> bool:
        """At the boundary before ``step``: re-read the file when it changed; returns whether to dump."""
        if self.path is None:
            return self.enabled
        signature = self._stat()
        if signature is None or signature == self._signature:
            return self.enabled
        self._signature = signature
        try:
            raw = read_config(self.path)
            value = raw.get("dump_enable", self.enabled)
            if not isinstance(value, bool):
                raise ConfigError(f'{self.path}: key "dump_enable": expected true/false, got {value!r}')
        except ConfigError as exc:
            if self.enabled:
                _say(f"{exc}; dumping is off from step {step} until the file is fixed")
            self.enabled = False
            return False
        changed = sorted(key for key in set(raw) | set(self._others)
                         if key != "dump_enable" and raw.get(key) != self._others.get(key))
        if changed:
            _say(f"{self.path}: changed {', '.join(changed)}; only dump_enable is re-read during a run, the other "
                 "keys apply at the next run")
            self._others = self._other_keys(raw)
        if value != self.enabled:
            _say(f"{self.path}: dump_enable is now {str(value).lower()}: dumping is "
                 f"{'on' if value else 'off'} from step {step}")
        self.enabled = value
        return value


def _say(text: str) -> None:
    print(f"probe: {text}", file=sys.stderr, flush=True)
