"""Background merges finish when a one-file `plm ingest` exits (issue 46 item 2): the merge
thread outlives `main`, when the interpreter no longer lets it use a thread pool; the fifth
one-file ingest into an index warned `background merge ... failed: cannot schedule new
futures after shutdown`, every time, and the segments were never merged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plm_index.test_quiet_output import CONFIG, plm


def test_one_file_ingests_merge_their_segments_with_no_warning(tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    (tmp_path / "job.toml").write_text(CONFIG)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "first.md").write_text("# First\n\nPods and nodes.\n")
    assert plm("ingest", "docs", "--config", "job.toml", cwd=tmp_path).returncode == 0
    for i in range(6):
        (docs / f"new{i}.md").write_text(f"# New {i}\n\nword{i} about services.\n")
        res = plm("ingest", f"docs/new{i}.md", "--config", "job.toml", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert "failed" not in res.stderr and "warning" not in res.stderr, res.stderr
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "data").glob("*/bm25s-*/manifests/v*.json")]
    segments = max(manifests, key=lambda m: m["counter"])["segments"]
    assert len(segments) < 4, segments  # 7 syncs, merged by factor 4 as they went
    res = plm("query", "word5", "--config", "job.toml", cwd=tmp_path)
    assert res.returncode == 0 and "new5" in res.stdout, res.stdout + res.stderr
