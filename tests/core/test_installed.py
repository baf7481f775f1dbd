"""probe_core.installed reads what importlib.metadata reads, without importing it."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import zipfile

import pytest

from probe_core import installed


@pytest.mark.parametrize("group", ["probe", "console_scripts", "pytest11"])
def test_the_entry_points_of_this_environment_are_importlib_metadatas(group):
    ours = sorted((ep.name, ep.value, ep.distribution, ep.version) for ep in installed.entry_points(group))
    theirs = sorted((ep.name, ep.value.split("[")[0].strip(), ep.dist.metadata["Name"], ep.dist.version)
                    for ep in md.entry_points(group=group))
    assert ours and ours == theirs


@pytest.mark.parametrize("name", ["torch", "probe-core", "Probe_Torch", "pluggy", "no-such-distribution"])
def test_versions_are_importlib_metadatas(name):
    try:
        expected = md.version(name)
    except md.PackageNotFoundError:
        expected = None
    assert installed.version(name) == expected


def test_the_first_distribution_of_a_name_on_the_path_wins(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, version, target in ((first, "2.0", "pkg_new:Plugin"), (second, "1.0", "pkg_old")):
        info = folder / f"my_plugin-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: My-Plugin\nVersion: {version}\n\nbody: x\n")
        (info / "entry_points.txt").write_text(f"# comment\n[other]\nx = y\n\n[probe]\nmine = {target} [extra]\n")
    egg = second / "old_thing.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: old-thing\nVersion: 0.3\n")
    (egg / "entry_points.txt").write_text("[probe]\nold = old_thing.plugin:make.factory\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    found = {ep.name: ep for ep in installed.entry_points("probe")}
    assert set(found) == {"mine", "old"}
    assert (found["mine"].value, found["mine"].distribution, found["mine"].version) == ("pkg_new:Plugin", "My-Plugin",
                                                                                          "2.0")
    assert (found["old"].distribution, found["old"].version) == ("old-thing", "0.3")
    assert installed.version("my.plugin") == "2.0" and installed.version("OLD_THING") == "0.3"


def test_an_entry_point_loads_its_attribute_path(tmp_path, monkeypatch):
    (tmp_path / "deep_mod.py").write_text("class Outer:\n    class Inner:\n        value = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = installed.EntryPoint("x", "deep_mod:Outer.Inner", "probe", "d", "1").load()
    assert loaded.value == 42


def test_a_zip_on_the_path_is_left_to_importlib_metadata(tmp_path):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped_plugin.py", "MARK = 'from the zip'\n")
        zipped.writestr("zipped_plugin-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped-plugin\n"
                                                                 "Version: 1.0\n")
        zipped.writestr("zipped_plugin-1.0.dist-info/entry_points.txt", "[probe]\nzipped = zipped_plugin\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from probe_core import installed; "
            "[ep] = [ep for ep in installed.entry_points('probe') if ep.name == 'zipped']; "
            "print(ep.distribution, ep.version, ep.load().MARK, installed.version('zipped-plugin'))")
    done = subprocess.run([sys.executable, "-c", code, str(archive)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["zipped-plugin", "1.0", "from", "the", "zip", "1.0"]


def test_a_probe_command_does_not_import_importlib_metadata():
    code = ("import sys; from probe_core.cli import main; main(['plugins']); "
            "print('importlib.metadata' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "False"
