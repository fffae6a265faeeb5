"""Where an index lives when PLM_DATA_DIR is not set (issue 23): in `.plm` beside the config
file, as the config's own relative paths are, so `--config /abs/job.toml` finds the same
index from any working directory; errors name the absolute location."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from plm_needs import needs

from plm_core.settings import Settings
from plm_index.job import settings_for

pytestmark = needs("bm25s", extra="bm25")

CONFIG = """
[job]
name = "where"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
"""


def plm(*args: str, cwd: Path, data_dir: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PLM_DATA_DIR"}
    env |= {"PLM_PROGRESS": "0", "PLM_CACHE": "0", **({"PLM_DATA_DIR": data_dir} if data_dir else {})}
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_the_default_index_is_beside_the_config_from_any_working_directory(tmp_path: Path) -> None:
    project, elsewhere, docs = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "docs"
    for folder in (project, elsewhere, docs):
        folder.mkdir()
    config = project / "job.toml"
    config.write_text(CONFIG)
    (docs / "pager.md").write_text("# Pager\n\nThe pager rotates every Monday to the next engineer.\n")
    ingested = plm("ingest", "docs", "--config", "project/job.toml", cwd=tmp_path)
    assert ingested.returncode == 0, ingested.stderr
    assert (project / ".plm" / "where" / "plm.sqlite").is_file()
    assert str(project / ".plm" / "where") in ingested.stdout  # the summary names where it went
    found = plm("query", "pager rotation", "--config", str(config), cwd=elsewhere)
    assert found.returncode == 0 and "pager" in found.stdout, found.stderr
    assert not (elsewhere / ".plm").exists() and not (tmp_path / ".plm").exists()


def test_no_index_names_the_absolute_folder(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(CONFIG)
    res = plm("query", "x", "--config", "job.toml", cwd=tmp_path)
    assert res.returncode == 2 and f"no index at {tmp_path / '.plm' / 'where'}:" in res.stderr, res.stderr
    relative = plm("query", "x", "--config", "job.toml", cwd=tmp_path, data_dir="indexes")
    assert f"no index at {tmp_path / 'indexes' / 'where'}:" in relative.stderr, relative.stderr


def test_settings_for_a_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLM_DATA_DIR", raising=False)
    config = Path("/srv/team/job.toml")
    assert settings_for(config, Settings()).data_dir == "/srv/team/.plm"
    assert settings_for(config, Settings(data_dir="/data")).data_dir == "/data"
    assert settings_for(config, Settings(data_dir="rel")).data_dir == str(Path.cwd() / "rel")
