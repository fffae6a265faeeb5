"""The documentation site (mkdocs.yml, docs/): it builds with warnings as errors, and its
stage pages, generated from the plugin registry, cover every built-in stage and every key."""

from __future__ import annotations

import html
import subprocess
import sys
from pathlib import Path

import pytest
from plm_needs import needs

from plm_core.config import job_section
from plm_core.settings import Settings
from plm_index.plugin_info import config_keys, describe_fields
from plm_index.plugins import build_registry

REPO = Path(__file__).resolve().parents[1]

pytestmark = needs("mkdocs", extra="docs")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def test_every_builtin_stage_has_a_page_with_every_key(site: Path) -> None:
    stages = [r for r in build_registry(autoload=False).all() if r.package == "plm"]
    assert len(stages) >= 30
    index = (site / "stages" / "index.html").read_text()
    for reg in stages:
        page = site / "stages" / reg.family / reg.name / "index.html"
        assert page.is_file(), f"no page for {reg.family}:{reg.name}"
        text = page.read_text()
        assert f"{reg.cls.__module__}.{reg.cls.__name__}" in text
        for key in config_keys(reg):
            assert f"<code>{html.escape(key.name, quote=False)}</code>" in text, (reg.name, key.name)
        assert f'href="{reg.family}/{reg.name}/"' in index, reg.name
    # A third-party plugin installed beside plm (the README's test command installs one) is
    # not on plm's own site.
    for reg in build_registry().all():
        if reg.package != "plm":
            assert not (site / "stages" / reg.family / reg.name).exists(), reg.name


def test_settings_page_lists_every_variable_and_job_key(site: Path) -> None:
    text = (site / "settings" / "index.html").read_text()
    for name in Settings.model_fields:
        assert f"<code>PLM_{name.upper()}</code>" in text, name
    for key in describe_fields(job_section(build_registry())):
        assert f"<code>{key.name}</code>" in text, key.name
    assert "{{" not in text


def test_benchmarks_and_the_recipe_table_come_from_their_one_copy(site: Path) -> None:
    benchmarks = (site / "benchmarks" / "index.html").read_text()
    headings = [line[3:] for line in (REPO / "BENCHMARKS.md").read_text().splitlines() if line.startswith("## ")]
    assert headings and all(
        html.escape(h.replace("`", ""), quote=False) in benchmarks.replace("<code>", "").replace("</code>", "")
        for h in headings
    )
    assert (site / "bench" / "results" / "scale.png").is_file()
    recipes = (site / "recipes" / "index.html").read_text()
    assert "<code>configs/recommended.toml</code>" in recipes and "{{" not in recipes
