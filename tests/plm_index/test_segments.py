"""Segmented indexes (plm_index.segments) against whole builds of the same corpus.

A random sequence of adds, edits and deletes goes into a real store (SQLite, and Postgres
through the session's server); the BM25 and dense indexes follow it by `refresh` (a
segment per sync, deletions, background merges with a small merge factor), and at every
checkpoint they must rank exactly as indexes built whole from the store's final state:
the same scores (BM25 within 1e-6, in fact bit for bit; dense identical) and the same hits
in the same order, filters included.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plm_core.records import Chunk, Document, EmbeddedQuery, ExpandedQuery
from plm_index import segments
from plm_index.corpus import CorpusSnapshot
from plm_plugins.retrievers.bm25s import BM25Retriever
from plm_plugins.retrievers.dense import DenseRetriever
from plm_plugins.retrievers.faiss import FaissRetriever

WORDS = "pod node memory cpu service deploy replica scale volume claim ingress route secret token log".split()
QUERIES = ["pod memory", "node node cpu", "service route ingress", "secret token log", "volume", "unknown"]
DIM = 8


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if kind == "sqlite":
        from plm_plugins.stores.sqlite import SQLiteStore

        store = SQLiteStore(SQLiteStore.Config())
        store.open(tmp_path / "store")
        return store
    pytest.importorskip("psycopg")
    from plm_plugins.stores.postgres import PostgresStore

    dsn = request.getfixturevalue("pg_dsn")
    store = PostgresStore(PostgresStore.Config(dsn=dsn))
    store.open(str(tmp_path / "store"))
    return store


def _doc(rng: random.Random, doc_id: str, version: int) -> tuple[Document, list[Chunk], np.ndarray]:
    n = rng.randint(1, 3)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) for _ in range(n)]
    if rng.random() < 0.1 and texts:
        texts[-1] = texts[0]  # exact duplicates: equal scores, which only index order breaks
    chunks = [
        Chunk(id=f"{doc_id}#{version}.{j}", doc_id=doc_id, text=t, metadata={"even": int(doc_id[1:]) % 2 == 0})
        for j, t in enumerate(texts)
    ]
    vectors = np.asarray([[rng.gauss(0, 1) for _ in range(DIM)] for _ in chunks], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    if len(chunks) > 1 and rng.random() < 0.2:
        vectors[-1] = vectors[0]  # equal dense scores too
    return Document(id=doc_id, text=" ".join(texts)), chunks, vectors


def _step(store: Any, rng: random.Random, live: set[str], counter: list[int]) -> None:
    """One random sync: some new documents, some edited, some deleted."""
    op = rng.random()
    if op < 0.25 and live:
        store.delete_documents(rng.sample(sorted(live), min(len(live), rng.randint(1, 3))))
        live.difference_update(d for d in list(live) if d not in store.doc_fingerprints())
        return
    ids = [f"d{counter[0] + i}" for i in range(rng.randint(1, 4))] if op < 0.65 or not live else []
    counter[0] += len(ids)
    if live and op >= 0.5:
        ids += rng.sample(sorted(live), min(len(live), rng.randint(1, 3)))
    made = [_doc(rng, d, counter[0]) for d in ids]
    chunks = [c for _, cs, _ in made for c in cs]
    matrix = np.concatenate([v for _, _, v in made]) if chunks else None
    store.replace_documents([d for d, _, _ in made], chunks, matrix, "toy" if chunks else None, ["x"] * len(made))
    live.update(ids)


def _snapshot(store: Any, index_dir: Path) -> CorpusSnapshot:
    return CorpusSnapshot(store, index_dir, "toy")


def _same_rankings(got: Any, want: Any, snap: CorpusSnapshot, store: Any) -> None:
    even = store.filter_mask({"even": True})
    for text in QUERIES:
        if isinstance(got, BM25Retriever):
            query: ExpandedQuery = ExpandedQuery(text=text, k=50)
            a, b = got.scores(text), want.scores(text)
            # row layouts differ: compare each chunk's score by id
            by_id_a = {got.state.ids[int(r)]: a[r] for r in np.flatnonzero(got.state.live)}
            by_id_b = {want.state.ids[int(r)]: b[r] for r in range(len(b))}
            assert by_id_a.keys() == by_id_b.keys()
            assert max((abs(by_id_a[k] - by_id_b[k]) for k in by_id_a), default=0.0) <= 1e-6
        else:
            vector = np.random.default_rng(abs(hash(text)) % 1000).normal(size=DIM).astype(np.float32)
            query = EmbeddedQuery(text=text, k=50, vector=vector)
        for allowed in (None, even):
            assert got.search(query, 50, allowed) == want.search(query, 50, allowed), text


def _graphs_find_live_rows(exact: DenseRetriever, snap: CorpusSnapshot, store: Any) -> None:
    """faiss graphs per segment: k hits whenever k chunks match, never a deleted one, exact
    scores, and most of the exact top 10."""
    reader = FaissRetriever(label="ann", index="hnsw", exact_below=0)
    reader.load(snap, Path(snap.location))
    live = set(store.chunk_ids())
    found = 0
    for text in QUERIES:
        vector = np.random.default_rng(abs(hash(text)) % 1000).normal(size=DIM).astype(np.float32)
        query = EmbeddedQuery(text=text, k=10, vector=vector)
        hits, truth = reader.search(query, 10), exact.search(query, 10)
        assert len(hits) == min(10, len(live)) and {h.chunk_id for h in hits} <= live
        scores = {h.chunk_id: h.score for h in exact.search(query, len(live))}
        assert all(h.score == scores[h.chunk_id] for h in hits)
        found += len({h.chunk_id for h in hits} & {h.chunk_id for h in truth})
    assert found >= 0.8 * 10 * len(QUERIES)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_random_changes_rank_as_a_whole_build(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments.merge, "MERGE_FACTOR", 3)
    monkeypatch.setattr(segments.merge, "FLOOR_ROWS", 4)
    store = _store(kind, tmp_path, request)
    rng, live, counter = random.Random(7), set(), [0]
    index_dir = tmp_path / "index"
    steps = 1000 if kind == "sqlite" else 300
    bm25 = BM25Retriever(label="bm25", tokenizer="whitespace_lower", method="lucene")
    okapi = BM25Retriever(label="okapi", tokenizer="whitespace_lower", method="rank_bm25_okapi")
    dense = DenseRetriever(label="dense")
    exact = FaissRetriever(label="exact", index="hnsw", exact_below=10**9)  # every segment scanned
    ann = FaissRetriever(label="ann", index="hnsw", exact_below=0)  # every segment searched by its graph
    every = (bm25, okapi, dense, exact, ann)
    merged = set()
    for i in range(steps):
        _step(store, rng, live, counter)
        if i % 10 != 9:
            continue
        with store.snapshot():
            snap = _snapshot(store, index_dir)
            for ix in every:
                ix.refresh(snap, index_dir)
        if i % 50 == 49:
            segments.wait_for_merges()
            merged |= {s.name for ix in every for s in ix.state.segments if "-m" in s.name}
            with store.snapshot():
                snap = _snapshot(store, index_dir)
                for ix, fresh in (
                    (bm25, BM25Retriever(label="bm25", tokenizer="whitespace_lower", method="lucene")),
                    (okapi, BM25Retriever(label="okapi", tokenizer="whitespace_lower", method="rank_bm25_okapi")),
                    (dense, DenseRetriever(label="dense")),
                    (exact, FaissRetriever(label="exact", index="hnsw", exact_below=10**9)),
                ):
                    reader = type(ix)(label=ix.label, **ix.config.model_dump())
                    reader.load(snap, index_dir)  # another process: the saved segments
                    fresh.build(_snapshot(store, index_dir), None)  # the whole build
                    assert reader.state is not None and reader.state.n_live == snap.n_chunks
                    _same_rankings(reader, fresh, snap, store)
                    _same_rankings(ix, fresh, snap, store)
                _graphs_find_live_rows(dense, snap, store)
    assert len(bm25.state.segments) > 1 and merged  # several segments, and merges
    segments.wait_for_merges()


def test_a_killed_merge_leaves_the_index_as_its_manifest_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge writes its segment, then swaps it into the manifest: killed in between, the
    index is the one before, and the orphan segment is removed once it is old."""
    from plm_plugins.stores.sqlite import SQLiteStore

    monkeypatch.setattr(segments.index, "start_merge", lambda index, base: None)  # a segment per sync, kept

    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    rng, live, counter = random.Random(3), set(), [0]
    index_dir = tmp_path / "index"
    bm25 = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
    for _ in range(12):
        _step(store, rng, live, counter)
        with store.snapshot():
            bm25.refresh(_snapshot(store, index_dir), index_dir)
    base = bm25.stage_base(index_dir)
    before = sorted(p.name for p in (base / "segments").iterdir())
    # A merge that dies after writing its segment: the commit never happens.
    real = segments.index._write_manifest

    def die(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    original_plan = segments.index.merge_plan
    segments.index.merge_plan = lambda state: list(range(len(state.segments))) if len(state.segments) > 1 else None
    segments.index._write_manifest = die
    try:
        with pytest.raises(KeyboardInterrupt):
            bm25.merge_once(base)
    finally:
        segments.index._write_manifest = real
        segments.index.merge_plan = original_plan
    after = sorted(p.name for p in (base / "segments").iterdir())
    assert len(after) == len(before) + 1  # the orphan
    with store.snapshot():
        snap = _snapshot(store, index_dir)
        reader = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
        reader.load(snap, index_dir)
        fresh = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
        fresh.build(_snapshot(store, index_dir), None)
        _same_rankings(reader, fresh, snap, store)
    (orphan,) = set(after) - set(before)
    segments.collect_garbage(base, now=time.time() + 10 * segments.GRACE_S)
    kept = sorted(p.name for p in (base / "segments").iterdir())
    named = {s["name"] for _, m in segments.manifest._manifests(base) for s in m["segments"]}
    assert orphan not in kept and set(kept) == named


MERGER = """
import sys
from pathlib import Path
from plm_index import segments
from plm_plugins.retrievers.bm25s import BM25Retriever
segments.merge.MERGE_FACTOR, segments.merge.FLOOR_ROWS = 2, 1
bm25 = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
base = bm25.stage_base(Path(sys.argv[1]))
print("merging", flush=True)
while bm25.merge_once(base):
    pass
"""


@pytest.mark.slow
def test_sigkill_during_merges_leaves_an_index_that_ranks_as_a_whole_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from plm_plugins.stores.sqlite import SQLiteStore

    monkeypatch.setattr(segments.index, "start_merge", lambda index, base: None)  # merges only in the child
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    rng, live, counter = random.Random(11), set(), [0]
    index_dir = tmp_path / "index"
    bm25 = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
    for _ in range(4):
        for _ in range(15):
            _step(store, rng, live, counter)
            with store.snapshot():
                bm25.refresh(_snapshot(store, index_dir), index_dir)
        child = subprocess.Popen([sys.executable, "-c", MERGER, str(index_dir)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "merging"
        time.sleep(rng.uniform(0.0, 0.4))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        with store.snapshot():
            snap = _snapshot(store, index_dir)
            reader = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
            reader.load(snap, index_dir)  # whatever the manifest names, whole and checked
            fresh = BM25Retriever(label="bm25", tokenizer="whitespace_lower")
            fresh.build(_snapshot(store, index_dir), None)
            _same_rankings(reader, fresh, snap, store)
            bm25.refresh(snap, index_dir)  # and the next sync goes on from it
        segments.collect_garbage(bm25.stage_base(index_dir), now=time.time() + 10 * segments.GRACE_S)
        assert not [p for p in (bm25.stage_base(index_dir) / "segments").iterdir() if p.name.startswith(".tmp-")]
