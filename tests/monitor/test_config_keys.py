"""msprobe's monitor config spellings: ``cc_distribution`` as the object msprobe's docs and test configs write."""

from __future__ import annotations

import warnings

import pytest

from probe_core.errors import ConfigError
from probe_monitor.config import load_monitor_config
from tests.monitor.helpers import write_config


def test_cc_distribution_object_as_msprobe_writes_it(tmp_path):
    # msprobe's test_msprobe/pytorch_ut/monitor/config/cc_config.json
    path = write_config(tmp_path / "cc.json", targets={"": {}}, cc_distribution={"enable": True, "cc_codeline": []},
                        alert={"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}],
                               "dump": True}, format="csv", ops=["norm"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: enable is honoured, the code-line filter is empty
        assert load_monitor_config(path).cc_distribution is True
    assert load_monitor_config(write_config(tmp_path / "off.json", cc_distribution={"enable": False})) \
        .cc_distribution is False
    assert load_monitor_config(write_config(tmp_path / "bool.json", cc_distribution=True)).cc_distribution is True


def test_cc_distribution_options_probe_lacks_warn_and_bad_keys_are_refused(tmp_path):
    path = write_config(tmp_path / "log.json", cc_distribution={"enable": True, "cc_log_only": True})
    with pytest.warns(UserWarning, match=r'key "cc_distribution.cc_log_only" has no effect in probe-monitor'):
        assert load_monitor_config(path).cc_distribution is True
    with pytest.raises(ConfigError, match=r'key "cc_distribution": unknown key "enabled"; allowed: "enable"'):
        load_monitor_config(write_config(tmp_path / "bad.json", cc_distribution={"enabled": True}))
    with pytest.raises(ConfigError, match=r'key "cc_distribution": "enable" must be true/false'):
        load_monitor_config(write_config(tmp_path / "bad2.json", cc_distribution={"enable": "yes"}))
