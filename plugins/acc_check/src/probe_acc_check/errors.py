"""The pre-check's two kinds of trouble: a user mistake (one red line, exit 2) and an API that cannot run."""

from __future__ import annotations

from probe_core.api import ProbeError


class AccCheckError(ProbeError):
    """The pre-check cannot go on: bad dump, unwritable output, bad options (file, key, fix in one line)."""


class SkipApi(Exception):  # noqa: N818 (a signal, not an error: the API becomes a skipped row)
    """One API cannot be re-run; ``reason`` goes into the Message column of its skipped row."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def first_line(exc: BaseException) -> str:
    """An exception's first line, at most 300 characters: what a Message cell says about it."""
    return (str(exc).strip().splitlines() or [""])[0][:300]
