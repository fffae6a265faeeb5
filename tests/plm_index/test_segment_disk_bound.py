"""Disk used by superseded segments is bounded by count and bytes, not only by time: many
small syncs within the grace period (600 single-document edits over HTTP once left about
500 old segment folders, 88 MB) keep at most about MAX_SUPERSEDED of them, while a reader
still holding an old version answers as before."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from plm_core.records import Chunk, Document, ExpandedQuery
from plm_index import segments
from plm_index.corpus import CorpusSnapshot
from plm_plugins.retrievers.bm25s import BM25Retriever
from plm_plugins.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow  # seconds each: the full suite and CI run them

WORDS = "pod node memory cpu service deploy replica scale volume claim ingress route secret token log".split()


def _put(store: SQLiteStore, doc_id: str, text: str) -> None:
    chunk = Chunk(id=f"{doc_id}#{abs(hash(text)) % 10**8}", doc_id=doc_id, text=text)
    store.replace_documents([Document(id=doc_id, text=text)], [chunk], None, None, ["x"])


def _superseded(base: Path) -> set[str]:
    """Segment folders that none of the newest KEEP_MANIFESTS versions names."""
    manifests = [json.loads(p.read_text()) for p in (base / "manifests").glob("v*.json")]
    manifests.sort(key=lambda m: m["position"])
    named = {s["name"] for m in manifests[-segments.KEEP_MANIFESTS :] for s in m["segments"]}
    return {p.name for p in (base / "segments").iterdir() if not p.name.startswith(".")} - named


def test_many_small_syncs_keep_superseded_segments_bounded(tmp_path: Path) -> None:
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    index_dir = tmp_path / "index"
    for i in range(20):
        _put(store, f"d{i}", " ".join(WORDS[(i + j) % len(WORDS)] for j in range(6)))
    writer = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
    with store.snapshot():
        writer.build(CorpusSnapshot(store, index_dir, None), index_dir)
        old = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
        old.load(CorpusSnapshot(store, index_dir, None), index_dir)  # a reader pinned to the first version
    query = ExpandedQuery(text="pod memory secret", k=20)
    before = old.search(query, 20)
    base = writer.stage_base(index_dir)
    most = manifests = 0
    started = time.time()
    for step in range(220):  # single-document edits, each its own sync, well within GRACE_S
        _put(store, f"d{step % 20}", f"edit {step} " + " ".join(WORDS[(step * 7 + j) % len(WORDS)] for j in range(5)))
        with store.snapshot():
            writer.refresh(CorpusSnapshot(store, index_dir, None), index_dir)
        most = max(most, len(_superseded(base)))
        manifests = max(manifests, len(list((base / "manifests").glob("v*.json"))))
    segments.wait_for_merges()
    assert time.time() - started < segments.GRACE_S  # the bound, not the grace period, did it
    assert most <= segments.MAX_SUPERSEDED + 4, most
    # Manifests too, though this process holds segments every version names (a server's readers).
    assert manifests <= segments.MAX_SUPERSEDED + segments.KEEP_MANIFESTS + 1, manifests
    assert old.search(query, 20) == before  # the old reader still answers from its version
    with store.snapshot():
        fresh, whole = (
            BM25Retriever(label="bm25", tokenizer="whitespace_lower"),
            BM25Retriever(label="w", tokenizer="whitespace_lower"),
        )
        fresh.load(CorpusSnapshot(store, index_dir, None), index_dir)  # the newest version opens whole
        whole.build(CorpusSnapshot(store, index_dir, None), None)
        got, want = fresh.search(query, 20), whole.search(query, 20)
        assert [(h.chunk_id, h.score) for h in got] == [(h.chunk_id, h.score) for h in want]
    store.close()


def test_a_server_holding_every_version_s_base_segment_keeps_manifests_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's readers hold the big segment every version names (merges of small ones
    never touch it): manifests naming a held segment were all kept, 561 after 250 writes."""
    monkeypatch.setattr(segments.merge, "FLOOR_ROWS", 4)  # the 20-row base is a tier of its own
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    index_dir = tmp_path / "index"
    for i in range(20):
        _put(store, f"d{i}", " ".join(WORDS[(i + j) % len(WORDS)] for j in range(6)))
    writer = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
    with store.snapshot():
        writer.build(CorpusSnapshot(store, index_dir, None), index_dir)
    base = writer.stage_base(index_dir)
    most = 0
    for step in range(120):
        _put(store, f"new{step}", f"edit {step} pod")  # additions: the base segment is never edited
        with store.snapshot():
            writer.refresh(CorpusSnapshot(store, index_dir, None), index_dir)
            reader = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
            reader.load(CorpusSnapshot(store, index_dir, None), index_dir)  # a server's new generation
        most = max(most, len(list((base / "manifests").glob("v*.json"))))
    segments.wait_for_merges()
    assert most <= segments.MAX_SUPERSEDED + segments.KEEP_MANIFESTS + 1, most
    with store.snapshot():
        assert reader.search(ExpandedQuery(text="edit 119", k=1), 1)[0].chunk_id.startswith("new119#")
    store.close()
