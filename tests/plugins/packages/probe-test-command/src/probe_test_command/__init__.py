"""A third-party ``probe`` subcommand (plugin ``hello``): ``probe hello NAME``."""

from __future__ import annotations

import argparse

from probe_core.api import CommandSpec, hookimpl



def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="who to greet")
    parser.add_argument("--shout", action="store_true", help="greet in capitals")


def _run(args: argparse.Namespace) -> int:
    text = f"hello {args.name} (from a registry of {len(args.registry.plugins)} plugins)"
    print(text.upper() if args.shout else text)
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("hello", "greet someone (a test plugin's command)", _configure, _run)]
