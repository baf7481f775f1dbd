"""Every extension family proved from outside: real packages pip-installed into a folder, the real CLI.

data modes: test_data_mode.py (examples/plugins/probe-xor); comparators: test_comparator.py;
graph mergers: test_graph_merger.py; commands: test_command.py; config sections:
test_config_section.py; checkers: tests/config_check/test_third_party.py (examples/plugins/
probe-example-checker). The in-process testing kit (probe_core.testing): test_testing_kit.py; the
runnable examples of docs/plugins.md: test_docs_examples.py.
"""
