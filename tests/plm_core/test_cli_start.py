"""What `plm` does before any command runs, against a broken environment: a third-party
plugin that fails to import or to register is skipped with one warning naming it (every
other command, `--help` and `--version` included, still works), and a folder named `plm`
that shadows the package is named in the error."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_site import plugin_site

from plm_index.plugins import shadowed_package_note

REPO = Path(__file__).resolve().parents[2]

BROKEN_IMPORT = "raise ImportError('needs the frobnicator library')\n"
BROKEN_HOOK = """
from plm_core.hookspecs import hookimpl

@hookimpl
def plm_register_commands(app):
    raise RuntimeError("commands exploded")

@hookimpl
def plm_register_components(registry):
    raise RuntimeError("components exploded")
"""


def _dist(site: Path, package: str, module: str, source: str) -> None:
    """A real installed distribution, as pip leaves one (`plugin_site`)."""
    plugin_site(site, module, source, package=package)


def _site(tmp_path: Path, *dists: tuple[str, str, str]) -> Path:
    """A site folder holding each (package, module, source) as an installed distribution."""
    site = tmp_path / "site"
    site.mkdir()
    for package, module, source in dists:
        _dist(site, package, module, source)
    return site


def plm(*args: str, cwd: Path = REPO, site: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    paths = [str(site)] if site else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    full = {**os.environ, "PLM_PROGRESS": "0", "PYTHONPATH": os.pathsep.join(paths), **env}
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=cwd, timeout=120)


@pytest.fixture()
def broken_site(tmp_path: Path) -> Path:
    return _site(tmp_path, ("plm-frob", "plm_frob", BROKEN_IMPORT), ("plm-exploding", "plm_exploding", BROKEN_HOOK))


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["plugins"], ["config", "check", "-h"]])
def test_a_broken_third_party_plugin_warns_once_and_every_command_still_works(
    broken_site: Path, args: list[str]
) -> None:
    res = plm(*args, site=broken_site)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    if args == ["--version"]:  # answered before any plugin loads: nothing to warn about
        assert res.stdout.startswith("plm ") and res.stderr == ""
        return
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    frob = [w for w in warnings if "plugin 'plm_frob'" in w]
    assert len(frob) == 1, res.stderr  # once, though the CLI and the registry both load plugins
    assert "package 'plm-frob'" in frob[0] and "ImportError: needs the frobnicator library" in frob[0]
    assert "PLM_DISABLE_PLUGIN_AUTOLOAD=1" in frob[0]
    (hook,) = [w for w in warnings if "commands exploded" in w]
    assert "package 'plm-exploding'" in hook and "PLM_DISABLE_PLUGIN_AUTOLOAD=1" in hook
    if args == ["plugins"]:
        assert "components exploded" in res.stderr
        assert "bm25s" in res.stdout and "plm_frob" not in res.stdout
    if args == ["--help"]:
        assert "ingest" in res.stdout and "query" in res.stdout and "eval" in res.stdout


def test_autoload_off_skips_broken_plugins_silently(broken_site: Path) -> None:
    res = plm("plugins", site=broken_site, PLM_DISABLE_PLUGIN_AUTOLOAD="1")
    assert res.returncode == 0 and res.stderr == "", res.stderr


def test_a_config_naming_a_stage_of_a_broken_plugin_says_it_did_not_load(broken_site: Path) -> None:
    res = plm("plugins", "show", "frob", site=broken_site)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    error = next(line for line in res.stderr.splitlines() if line.startswith("error: "))
    assert "unknown component 'frob'" in error and "Not loaded: plugin 'plm_frob'" in error


def test_a_plm_package_in_the_working_directory_is_named_in_the_error(tmp_path: Path) -> None:
    (tmp_path / "plm").mkdir()
    (tmp_path / "plm" / "__init__.py").write_text("")  # someone's own project called plm
    res = plm("--help", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    message = " ".join(res.stderr.split())
    assert f"a folder named plm in {tmp_path} (the working directory) shadows the installed package" in message
    assert "run plm from another directory, or rename that folder" in message


def test_an_empty_plm_folder_read_as_a_namespace_package_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `plm/` without __init__.py is a namespace package, found ahead of an editable
    # install's import hook (a regular install wins): here `import plm` is made to find it.
    (tmp_path / "plm").mkdir()
    spec = importlib.machinery.PathFinder.find_spec("plm", [str(tmp_path)])
    assert spec is not None and spec.origin in (None, "namespace")
    monkeypatch.setitem(sys.modules, "plm", importlib.util.module_from_spec(spec))
    monkeypatch.chdir(tmp_path)
    note = shadowed_package_note()
    assert f"a folder named plm in {tmp_path} (the working directory) shadows the installed package" in note
    monkeypatch.undo()
    assert shadowed_package_note() == ""  # the real package


def test_a_stage_whose_plugin_failed_to_load_is_named_with_the_reason(broken_site: Path) -> None:
    # the config names the plugin's own stage: the reason first, not a list of 50 known names
    res = plm("plugins", "show", "plm_frob", site=broken_site)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    error = next(line for line in res.stderr.splitlines() if line.startswith("error: "))
    assert error.startswith("error: 'plm_frob' is not available: plugin 'plm_frob' (plm_frob) from package 'plm-frob'")
    assert "ImportError: needs the frobnicator library" in error and "Known:" not in error


def test_a_plugin_that_registers_nothing_is_named(tmp_path: Path) -> None:
    # a misspelled hook, or none: the module loads, adds nothing, and its stages were "unknown"
    misspelt = "import plm\n\n@plm.hookimpl\ndef plm_register_component(registry):\n    pass\n"
    site = _site(tmp_path, ("plm-typo", "plm_typo", misspelt), ("plm-bare", "plm_bare", "X = 1\n"))
    res = plm("plugins", site=site)
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    (typo,) = [w for w in warnings if "'plm_typo'" in w]
    assert "from package 'plm-typo' registers nothing" in typo and "'plm_register_component': a misspelling?" in typo
    (bare,) = [w for w in warnings if "'plm_bare'" in w]
    assert "registers nothing: its module has no `@plm.hookimpl def plm_register_components(registry)`" in bare
    assert plm("plugins", site=site, PLM_DISABLE_PLUGIN_AUTOLOAD="1").stderr == ""


HALF_REGISTERED = """
import plm

class Shout(plm.Chunker):
    name = "shout"

    def run(self, data):
        return []

@plm.hookimpl
def plm_register_components(registry):
    registry.add(Shout)
    raise RuntimeError("boom after one")
"""

CLASHING = """
import plm

class MySemantic(plm.Chunker):
    name = "markdown_semantic"   # a built-in's name

    def run(self, data):
        return []

class Mine(plm.Chunker):
    name = "mine_only"

    def run(self, data):
        return []

@plm.hookimpl
def plm_register_components(registry):
    registry.add(MySemantic)
    registry.add(Mine)
"""


def test_a_plugin_whose_hook_raises_is_left_out_whole(tmp_path: Path) -> None:
    # its warning says "skipped": what it added before it raised is taken out again
    site = _site(tmp_path, ("plm-half", "plm_half", HALF_REGISTERED))
    res = plm("plugins", site=site)
    assert res.returncode == 0, res.stderr
    assert "RuntimeError: boom after one; skipped" in res.stderr
    assert "shout" not in res.stdout and "bm25s" in res.stdout


def test_a_name_two_packages_register_stops_only_the_configs_that_name_it(tmp_path: Path) -> None:
    site = _site(tmp_path, ("plm-clash", "plm_clash", CLASHING))
    res = plm("plugins", site=site)
    assert res.returncode == 0, res.stderr
    (warning,) = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert "duplicate chunkers name 'markdown_semantic'" in warning and "package 'plm-clash'" in warning
    assert "a config naming it stops with this error" in warning
    assert "mine_only" in res.stdout  # the package's other stages are there
    res = plm("plugins", "show", "markdown_semantic", site=site)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    error = next(line for line in res.stderr.splitlines() if line.startswith("error: "))
    assert "duplicate chunkers name 'markdown_semantic'" in error and "uninstall one of them or rename" in error
    assert plm("plugins", "show", "bm25s", site=site).returncode == 0


def test_a_hook_without_its_decorator_or_in_another_group_is_named(tmp_path: Path) -> None:
    site = _site(tmp_path, ("plm-undecorated", "plm_undecorated", "def plm_register_components(registry):\n    pass\n"))
    plugin_site(site, "plm_grouped", "X = 1\n", package="plm-grouped")
    (site / "plm_grouped-0.1.dist-info" / "entry_points.txt").write_text("[plm.chunkers]\nparas = plm_grouped\n")
    res = plm("plugins", site=site)
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    (bare,) = [w for w in warnings if "'plm_undecorated'" in w]
    assert "it has `def plm_register_components` without `@plm.hookimpl` above it" in bare
    (grouped,) = [w for w in warnings if "plm-grouped" in w]
    assert "entry point 'paras' of package 'plm-grouped' is in the group 'plm.chunkers'" in grouped
    assert "put it under [project.entry-points.plm]" in grouped


CLASH_THEN_RAISE = CLASHING.replace(
    "    registry.add(Mine)\n", "    registry.add(Mine)\n    raise RuntimeError('late')\n"
)


def test_a_clash_of_a_plugin_left_out_is_not_said(tmp_path: Path) -> None:
    # a package sorting before plm registers a built-in's name, then its hook raises: it is left
    # out whole, so no clash stands and the built-in works
    site = _site(tmp_path, ("aaa-clash-raise", "aaa_clash_raise", CLASH_THEN_RAISE))
    res = plm("config", "check", str(REPO / "configs" / "poc_parity.toml"), site=site)
    assert res.returncode == 0, res.stderr
    assert "duplicate" not in res.stderr and "RuntimeError: late; skipped" in res.stderr
