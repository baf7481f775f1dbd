from probe_core.cli import run

run()
