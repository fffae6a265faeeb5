"""A sync asked to stop (a server's SIGTERM during its watcher's catch-up) ends before its
next batch, keeping every batch it stored (issue 45 D12: `plm serve --watch` exited only
when the catch-up's embedding of the whole folder was done, 94.7 s)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from plm_core.settings import Settings
from plm_index.job import Job
from plm_index.sync import Processor, SyncStopped
from tests.plm_index.test_quiet_output import CONFIG


def test_a_stopped_sync_keeps_its_batches_and_the_next_one_does_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("bm25s")
    (tmp_path / "job.toml").write_text(CONFIG)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(40):
        (docs / f"d{i:02d}.md").write_text(f"# Doc {i}\n\nword{i} about pods.\n")
    settings = Settings(cache=False, progress=False, ingest_batch=5)
    stop, processed = threading.Event(), []
    real = Processor.process

    def process(self, batch, read_cache=True, embed=True):  # type: ignore[no-untyped-def]
        processed.append(len(batch))
        if len(processed) == 3:
            stop.set()  # SIGTERM arrives while the third batch is processed
        return real(self, batch, read_cache, embed)

    monkeypatch.setattr(Processor, "process", process)
    job = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings)
    with pytest.raises(SyncStopped, match="the batches stored stay"):
        job.ingest(docs, stop=stop)
    assert len(processed) == 3  # no fourth batch was begun
    assert len(job.store.doc_fingerprints()) == 15  # the three batches begun were stored
    monkeypatch.setattr(Processor, "process", real)
    report = job.ingest(docs, prune=True)
    assert (len(report.added), report.unchanged) == (25, 15)
    assert [h.doc_id for h in job.retrieve("word33", k=1)] == ["d33"]
    job.close()
