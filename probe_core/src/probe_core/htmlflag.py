"""``--html FILE`` on the commands that write an output folder (compare, monitor compare, locate, acc-check): the
page of that folder by ``probe report`` (distribution probe-report), run through the registry, so no command
imports the report plugin. Whether ``probe report`` is there is checked before the command's work starts."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

from probe_core.errors import PluginError


def add_html_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--html FILE``: also write probe report's page of ``what`` (the command's output folder)."""
    parser.add_argument("--html", metavar="FILE",
                        help=f"also write one self-contained HTML page of {what} to FILE (probe report's page; "
                             "needs the distribution probe-report)")


def check_html(args: argparse.Namespace) -> None:
    """With ``--html``: refuse before any work when no enabled plugin gives ``probe report``."""
    if getattr(args, "html", None) and "report" not in args.registry.commands:
        raise PluginError(f"--html {args.html}: the page is written by probe report, which is not installed or not "
                          "enabled (pip install probe-report; probe plugins lists what is); or leave out --html")


def write_html(args: argparse.Namespace, folder: str | Path, quiet: bool = False) -> None:
    """With ``--html``: ``probe report FOLDER -o FILE`` (it prints the page's path unless ``quiet``)."""
    if not getattr(args, "html", None):
        return
    from probe_core.cli import run_command

    check_html(args)
    argv = ["report", str(folder), "-o", str(args.html)]
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        run_command(argv, args.registry)
