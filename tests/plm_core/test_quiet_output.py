"""What `plm` prints besides its results (issue 23): warnings as `warning: ...` lines, no
transformers bar into a pipe, a progress bar that moves early, and a front matter block
that is not what it looks like is said, not silently read as a title."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from plm_index.sync import FIRST_BATCH, batches_of
from plm_plugins.loaders.markdown_dir import MarkdownLoader

CONFIG = """
[job]
name = "quiet"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
"""


def plm(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PLM_DATA_DIR": str(cwd / "data"), "PLM_PROGRESS": "0", "PLM_CACHE": "0", **env}
    cmd = [sys.executable, "-m", "plm_core.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=cwd, timeout=180)


def test_broken_front_matter_is_a_warning_line(tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    (tmp_path / "job.toml").write_text(CONFIG)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "open.md").write_text("---\ntitle: Never closed\n# Body\n\nText about pagers.\n")
    (docs / "bad.md").write_text("---\ntitle: A: b: [\n---\n# Bad\n\nText about backups.\n")
    (docs / "good.md").write_text("---\ntitle: Fine\ntags: [a, b]\n---\n# Good\n\nText.\n")
    res = plm("ingest", "docs", "--config", "job.toml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert any(line.startswith("warning: ") and "open.md" in line and "never closed" in line for line in lines), lines
    assert any(line.startswith("warning: ") and "bad.md" in line and "not valid YAML" in line for line in lines), lines
    assert not any("good.md" in line for line in lines) and "WARNING:" not in res.stderr


def test_front_matter_problems_reach_the_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "list.md").write_text("---\n- a\n- b\n---\n# List\n")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["list"] and not failures
    assert "not a YAML mapping" in caplog.text


def test_with_a_bar_the_first_batch_is_small_so_the_bar_moves_early() -> None:
    todo = list(range(150))
    shown = batches_of(todo, 64, progress=True)
    assert [len(b) for b in shown] == [FIRST_BATCH, 64, 64, 150 - FIRST_BATCH - 128]
    assert [x for b in shown for x in b] == todo
    assert [len(b) for b in batches_of(todo, 64, progress=False)] == [64, 64, 22]
    assert [len(b) for b in batches_of(todo[:3], 64, progress=True)] == [3]


@pytest.mark.slow
def test_no_loading_weights_bar_into_a_pipe(tmp_path: Path, minilm_path: str) -> None:
    config = CONFIG.replace(
        '[query.retrieve]\nuse = "bm25s"', '[query.embed]\nuse = "embed_query"\n[query.retrieve]\nuse = "dense"'
    )
    config += f'[embedder]\nuse = "sentence_transformers"\nmodel = "{minilm_path}"\n'
    (tmp_path / "job.toml").write_text(config)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text about pagers.\n")
    res = plm("ingest", "docs", "--config", "job.toml", cwd=tmp_path, PLM_PROGRESS="1", HF_HUB_OFFLINE="1")
    assert res.returncode == 0, res.stderr
    assert "Loading weights" not in res.stderr and "it/s" not in res.stderr, res.stderr
