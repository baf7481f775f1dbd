from __future__ import annotations

import pytest

from tests.interop.msprobe_env import msprobe_python


@pytest.fixture(scope="session")
def msprobe() -> str:
    """The python of a venv holding the real msprobe 26.2.0 (built on first use; skipped where pip cannot)."""
    python, why = msprobe_python()
    if python is None:
        pytest.skip(why)
    return python
