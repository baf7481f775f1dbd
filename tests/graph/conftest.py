"""Fixtures of the graph tests (helpers live in tests/graph/helpers.py)."""

from tests.graph.helpers import torch_pair  # noqa: F401
