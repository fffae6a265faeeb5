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
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
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


def _bm25_job(tmp_path: Path):  # type: ignore[no-untyped-def]
    pytest.importorskip("bm25s")
    from plm_core.settings import Settings
    from plm_index.job import Job

    (tmp_path / "job.toml").write_text(CONFIG)
    settings = Settings(data_dir=str(tmp_path / "data"), progress=False, cache=False)
    return Job.from_config(tmp_path / "job.toml", settings=settings)


def test_an_empty_index_says_so_without_a_word_about_bm25_builds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plm_core.errors import StoreError
    from plm_index import search

    monkeypatch.setattr(search, "_warned_stale", [])
    job = _bm25_job(tmp_path).open(create=True)
    try:
        with pytest.raises(StoreError, match="is empty"):
            job.search("anything", k=3)
    finally:
        job.close()
    assert "rebuilt in memory" not in caplog.text and "has no build" not in caplog.text


@pytest.mark.parametrize("expect_stale", [False, True])
def test_a_stale_build_warns_unless_a_server_expects_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, expect_stale: bool
) -> None:
    from plm_core.records import Chunk, Document
    from plm_index import search

    monkeypatch.setattr(search, "_warned_stale", [])
    job = _bm25_job(tmp_path)
    try:
        job.sync([{"id": "a", "text": "pagers rotate on mondays"}, {"id": "b", "text": "backups run nightly"}])
        # Another writer's commit, its BM25 build not saved yet (a watcher mid-sync).
        chunk = Chunk(id="c_0", doc_id="c", text="quotas per project", heading_path=("c",))
        job.store.replace_documents([Document(id="c", text=chunk.text)], [chunk], None, None)
        job.searcher.expect_stale = expect_stale
        with caplog.at_level("INFO"):
            assert job.retrieve("quotas", k=1)[0].doc_id == "c"  # answered right either way
    finally:
        job.close()
    # The saved BM25 segments are brought to the new version in memory from the store's
    # change feed: routine and cheap, so never a warning (a whole in-memory rebuild of an
    # index without segments still warns, unless a server expects one).
    stale = [r for r in caplog.records if "in memory" in r.getMessage()]
    assert stale and {r.levelname for r in stale} == {"INFO"}


def test_a_server_reader_expects_stale_builds(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from plm_serve.generation import Reader

    job = _bm25_job(tmp_path)
    job.sync([{"id": "a", "text": "pagers rotate on mondays"}])
    reader = Reader(job)
    try:
        assert job.searcher.expect_stale
    finally:
        reader.close()


def test_query_text_output_shows_source_ranks_and_short_metadata(capsys: pytest.CaptureFixture) -> None:
    from plm_index.commands import print_query_result

    paper = {
        "rank": 1,
        "doc_id": "db-001",
        "score": 0.2,
        "heading_path": [],
        "text": "Learned cardinality estimation.",
        "sources": {"dense": {"rank": 1, "score": 0.61234}, "bm25": {"rank": 3, "score": 8.4121}},
        "metadata": {
            "title": "Learned Cardinality",
            "authors": ["Maren Holt", "Dmitri Sokol"],
            "year": 2022,
            "bibtex_key": "holt2022cardinality",
            "path": "/data/papers.json",
            "nested": {"a": 1},
        },
    }
    print_query_result({"hits": [paper, {**paper, "rank": 2, "doc_id": "db-002", "sources": {}}]})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "1. db-001  Learned Cardinality  (dense #1 0.612, bm25 #3 8.41)"
    assert lines[1] == "   authors: Maren Holt, Dmitri Sokol; year: 2022; bibtex_key: holt2022cardinality"
    assert "0.2000" not in lines[0] and "0.2000" in lines[3]  # a ranking no fuser made keeps its score
