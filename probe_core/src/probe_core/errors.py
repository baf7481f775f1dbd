"""The one exception tree of probe.

Every error a user can cause (bad config, bad input file, bad plugin) is a
:class:`ProbeError`. The CLI prints it as one red line (file, key, fix) and
exits with code 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations


class ProbeError(Exception):
    """Base of every error probe reports to a user.

    ``messages`` holds one line per problem, so that a config with three bad
    values reports all three at once.
    """

    def __init__(self, *messages: str) -> None:
        self.messages: tuple[str, ...] = tuple(m for m in messages if m) or ("unknown error",)
        super().__init__("\n".join(self.messages))


class ConfigError(ProbeError):
    """config.json (or keyword overrides) holds a bad key or value."""


class PluginError(ProbeError):
    """A plugin is misdeclared: duplicate names, unknown names, bad registrations."""


class DumpError(ProbeError):
    """A dump folder or file cannot be read or written."""


class CompareError(ProbeError):
    """Two dumps cannot be compared as asked."""


class GraphError(ProbeError):
    """A graph cannot be built, compared or merged."""


class CheckError(ProbeError):
    """config_check or checkpoint compare cannot go on."""


class CollectionError(ProbeError):
    """Collection cannot start or go on (unwritable dump path, missing framework, ...)."""
