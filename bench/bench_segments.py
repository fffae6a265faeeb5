"""Segmented BM25 at scale: build cost against raw bm25s, and query latency with many
unmerged segments against one merged segment, on the same synthetic corpus.

N chunks of Zipf-distributed words (a 50k-word vocabulary, 20-120 words each) go into a
real SQLite store in batches (each batch one sync, as a watcher's saves would arrive).
  1. whole build: `plm`'s BM25 (tokenise + postings) against raw bm25s (tokenise +
     `BM25.index`) on the same texts and the same tokenizer, interleaved, median of runs;
  2. query p50/p95 over Q queries for the index after `refresh` per batch with merges off
     (S segments: 1, 10 and the merge policy's bound), against the same corpus merged
     into one segment; scores are checked equal;
  3. one changed chunk: the `refresh` that adds it (store read + one segment + manifest).

  python bench/bench_segments.py [--n 100000] [--queries 200] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from plm_core.records import Chunk, Document, ExpandedQuery
from plm_index import segments
from plm_index.corpus import CorpusSnapshot
from plm_plugins.retrievers.bm25s import BM25Retriever
from plm_plugins.stores.sqlite import SQLiteStore


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(50_000)])
    ranks = np.minimum(rng.zipf(1.3, size=n * 70), 50_000) - 1
    lengths = rng.integers(20, 120, size=n)
    out, at = [], 0
    for length in lengths:
        out.append(" ".join(words[ranks[at : at + length]]))
        at += length
        if at + 120 > len(ranks):
            at = 0
    return out


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def query_times(retriever: BM25Retriever, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        retriever.search(ExpandedQuery(text=q, k=10), 10)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import bm25s

    texts = corpus(args.n)
    rng = np.random.default_rng(1)
    queries = [" ".join(f"w{int(w)}" for w in rng.zipf(1.5, size=3) % 5000) for _ in range(args.queries)]
    ours = BM25Retriever(label="bm25")  # bm25s_stem tokenizer, lucene
    result: dict = {"n": args.n, "queries": args.queries}

    # 1. whole build against raw bm25s, same tokenizer, interleaved
    snap = CorpusSnapshot.of([Chunk(id=str(i), doc_id=str(i), text=t) for i, t in enumerate(texts)])
    plm_s, raw_s = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        ours.build(snap, None)
        plm_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        raw = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
        raw.index(_tokenized(ours, texts), show_progress=False)
        raw_s.append(time.perf_counter() - t0)
    result["build_s"] = {"plm": statistics.median(plm_s), "raw_bm25s": statistics.median(raw_s)}
    result["build_ratio"] = result["build_s"]["plm"] / result["build_s"]["raw_bm25s"]

    # 2. the same corpus through a store in batches, merges off, then S segments
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(SQLiteStore.Config())
        store.open(Path(tmp) / "store")
        bound = (segments.MERGE_FACTOR - 1) * (1 + segments.tier(args.n))
        result["policy_bound_segments"] = bound
        readers: dict[int, BM25Retriever] = {}
        for count in sorted({1, 10, bound}):
            index_dir = Path(tmp) / f"index-{count}"
            store_reset(store)
            step = -(-args.n // count)
            reader = BM25Retriever(label="bm25")
            original = segments.index.start_merge
            segments.index.start_merge = lambda index, base: None  # merges off: count segments exactly
            try:
                for lo in range(0, args.n, step):
                    part = range(lo, min(args.n, lo + step))
                    docs = [Document(id=str(i), text=texts[i]) for i in part]
                    chunks = [Chunk(id=str(i), doc_id=str(i), text=texts[i]) for i in part]
                    store.replace_documents(docs, chunks, None, None, ["x"] * len(docs))
                    with store.snapshot():
                        reader.refresh(CorpusSnapshot(store, index_dir), index_dir)
            finally:
                segments.index.start_merge = original
            assert reader.state is not None and len(reader.state.segments) == count, len(reader.state.segments)
            for q in queries[:20]:  # same hits, same scores
                assert reader.search(ExpandedQuery(text=q, k=10), 10) == ours.search(ExpandedQuery(text=q, k=10), 10)
            readers[count] = reader
        # Interleaved rounds (the machine is shared): every index answers every query each round.
        times: dict[str, list[float]] = {"merged": [], **{str(c): [] for c in readers}}
        for _ in range(args.runs):
            times["merged"] += query_times(ours, queries)
            for count, reader in readers.items():
                times[str(count)] += query_times(reader, queries)
        merged_times = times.pop("merged")
        result["query_merged"] = {"p50_ms": percentile(merged_times, 50), "p95_ms": percentile(merged_times, 95)}
        result["query_segments"] = {
            count: {
                "p50_ms": percentile(t, 50),
                "p95_ms": percentile(t, 95),
                "p50_ratio": percentile(t, 50) / percentile(merged_times, 50),
                "p95_ratio": percentile(t, 95) / percentile(merged_times, 95),
            }
            for count, t in times.items()
        }

        # 3. one changed chunk: the refresh that adds it
        changes = []
        for i in range(10):
            doc = Document(id=str(i), text=texts[i] + f" fresh{i}")
            store.replace_documents([doc], [Chunk(id=f"{i}.v2", doc_id=str(i), text=doc.text)], None, None, ["y"])
            t0 = time.perf_counter()
            with store.snapshot():
                reader.refresh(CorpusSnapshot(store, index_dir), index_dir)
            changes.append(time.perf_counter() - t0)
            assert reader.search(ExpandedQuery(text=f"fresh{i}", k=1), 1)[0].chunk_id == f"{i}.v2"
        segments.wait_for_merges()
        result["refresh_one_change_s"] = {"p50": percentile(changes, 50), "max": max(changes)}
        store.close()
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))


def _tokenized(ours: BM25Retriever, texts: list[str]):  # bm25s's Tokenized of our tokens
    import bm25s

    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in tokens] for tokens in ours.tokenize(texts)]
    return bm25s.tokenization.Tokenized(ids=ids, vocab=vocab)


def store_reset(store: SQLiteStore) -> None:
    ids = list(store.doc_fingerprints())
    if ids:
        store.delete_documents(ids)


if __name__ == "__main__":
    main()
