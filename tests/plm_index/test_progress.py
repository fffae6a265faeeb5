"""Progress without a bar (a pipe, a log, a background job, PLM_PROGRESS=0): a line on stderr
every so often during a long step, nothing for a short one, and never a bar on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plm_index import progress
from plm_index.progress import progress_iter

CONFIG = """
[job]
name = "progress"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
"""


def test_a_short_step_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(progress_iter(range(50), "index", show=False, unit="docs")) == list(range(50))
    assert list(progress_iter(range(50), "index", show=True, unit="docs")) == list(range(50))  # not a terminal
    assert capsys.readouterr() == ("", "")


def test_a_long_step_says_how_far_it_got(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.0)  # every item counts as a long wait
    batches = [[1, 2], [3, 4], [5]]
    assert list(progress_iter(batches, "index", show=False, total_items=5, unit="docs")) == batches
    out, err = capsys.readouterr()
    lines = err.splitlines()
    # One per batch; the last batch's line is the end's (issue 45: a small ingest said
    # "index: 8 of 8 docs" twice). A step whose last line came before its end says the end.
    assert out == "" and len(lines) == 3, lines
    assert lines[0] == "index: 2 of 5 docs (40%), 0 s"  # no pace yet: one item done
    assert lines[1] == "index: 4 of 5 docs (80%), 0 s, about 0 s left"
    assert lines[-1] == "index: 5 of 5 docs (100%), 0 s"
    # Slow batches say how far they got; a quick last one is said by the end's line alone.
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.005)
    paced = ((time.sleep(0.02) if len(b) == 2 else None) or b for b in batches)
    assert list(progress_iter(paced, "index", show=False, total_items=5, unit="docs")) == batches
    counts = [line.split(" of ")[0] for line in capsys.readouterr().err.splitlines()]
    assert counts[-1] == "index: 5" and len(counts) == len(set(counts)), counts
    line = progress.progress_line("index", 1200, 5000, "docs", 35, left=110.6)
    assert line == "index: 1,200 of 5,000 docs (24%), 35 s, about 111 s left"
    # The pace is taken from the first item on, not from the start: an embedding window's
    # batches arrive only once the whole window is embedded (here 8 docs after 164 s), then
    # the rest at once. No guess from one item; from two on, the pace since the first.
    assert progress._left((164.0, 8), 164.0, 8, 198) is None
    assert progress._left((164.0, 8), 166.0, 16, 198) == 182 * 2 / 8


def test_a_long_ingest_shows_signs_of_life_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("bm25s")
    from plm_core.settings import Settings
    from plm_index.job import Job

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(5):
        (docs / f"d{i}.md").write_text(f"# Page {i}\n\nText about pagers number {i}.\n")
    (tmp_path / "job.toml").write_text(CONFIG)
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.0)
    settings = Settings(data_dir=str(tmp_path / "data"), progress=False, cache=False, ingest_batch=2)
    job = Job.from_config(tmp_path / "job.toml", settings=settings)
    try:
        job.ingest([docs])
    finally:
        job.close()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("index: ")]
    assert lines[0].startswith("index: 2 of 5 docs (40%)") and lines[-1].startswith("index: 5 of 5 docs (100%)")


def test_no_bar_on_stdout_when_it_is_piped(tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nText about pagers.\n")
    (tmp_path / "job.toml").write_text(CONFIG)
    env = {**os.environ, "PLM_DATA_DIR": str(tmp_path / "data"), "PLM_PROGRESS": "1", "PLM_CACHE": "0"}
    cmd = [sys.executable, "-m", "plm_index.cli", "ingest", "docs", "--config", "job.toml", "--json"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["documents"] == 1  # the JSON alone: no bar before it
    assert "━" not in res.stdout + res.stderr
