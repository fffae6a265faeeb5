"""BM25 on SciFact: plm's BM25Retriever (build + search) vs raw bm25s vs rank_bm25.BM25Okapi.

Two pairings, each with the same tokenizer and scoring so quality must be identical:
  stemmed:    plm (tokenizer="bm25s_stem", method="lucene", float32)  vs  raw bm25s
              (bm25s.tokenize(stopwords="en", stemmer=PyStemmer english), BM25(method="lucene"))
  whitespace: plm (tokenizer="whitespace_lower", method="rank_bm25_okapi") vs rank_bm25.BM25Okapi
              on `text.lower().split()` tokens.
Both sides run in the SAME process, alternating order each repetition, single-threaded,
because the machine is shared and noisy: the within-run ratios are the comparable numbers.
plm keeps each word's impacts with the index version once a query met the word: the timed
passes after the first meet every word again. "plm first pass" reopens the index before
each pass (a new version: nothing kept), so its words are scored as they are first met.
Document text is `title + " " + text`. Build time = tokenize + index (+ save to disk for
plm and raw bm25s; rank_bm25 has no persistence). QPS = one query at a time, k=10.
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import bm25s  # noqa: E402
import ir_measures  # noqa: E402
import numpy as np  # noqa: E402
import rank_bm25  # noqa: E402
import Stemmer  # noqa: E402

from plm_core.records import Chunk, ExpandedQuery  # noqa: E402
from plm_index.corpus import CorpusSnapshot  # noqa: E402
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402

Run = dict[str, dict[str, float]]


def load_scifact(root: Path) -> tuple[list[str], list[str], dict[str, str], list[Any]]:
    ids, texts = [], []
    for line in (root / "corpus.jsonl").open():
        rec = json.loads(line)
        ids.append(rec["_id"])
        texts.append(f"{rec.get('title') or ''} {rec['text']}".strip())
    qrels = _qrels(root / "qrels/test.tsv")
    judged = {q.query_id for q in qrels}
    queries = {}
    for line in (root / "queries.jsonl").open():
        rec = json.loads(line)
        if rec["_id"] in judged:
            queries[rec["_id"]] = rec["text"]
    return ids, texts, queries, qrels


def _qrels(path: Path) -> list[Any]:
    rows = [line.rstrip("\n").split("\t") for line in path.open()][1:]
    return [ir_measures.Qrel(q, d, int(s)) for q, d, s in rows]


class Side:
    """One system under test: build() then query(text, k) -> (doc indices, scores)."""

    def __init__(
        self,
        name: str,
        build: Callable[[], Any],
        query: Callable[[Any, str, int], tuple[Any, Any]],
        reopen: Callable[[Any], None] | None = None,
    ):
        self.name, self._build, self._query, self.state, self._reopen = name, build, query, None, reopen

    def build(self) -> float:
        t0 = time.perf_counter()
        self.state = self._build()
        return time.perf_counter() - t0

    def query(self, text: str, k: int) -> tuple[Any, Any]:
        return self._query(self.state, text, k)

    def reopen(self) -> None:
        """Open the saved index again, as a new version is opened (plm: nothing derived yet)."""
        assert self._reopen is not None
        self._reopen(self.state)


def make_sides(pairing: str, ids: list[str], texts: list[str], tmp: Path) -> list[Side]:
    chunks = [Chunk(id=i, doc_id=i, text=t) for i, t in zip(ids, texts, strict=True)]
    stemmer = Stemmer.Stemmer("english")

    def plm_side(**cfg: Any) -> Side:
        def build() -> BM25Retriever:
            # Keep zero-score chunks, as raw bm25s's retrieve does, so the lists compare.
            r = BM25Retriever(BM25Retriever.Config(**{"drop_zero_scores": False, **cfg}))
            r.build(CorpusSnapshot.of(chunks), tmp / f"plm_{pairing}")
            return r

        def query(r: BM25Retriever, text: str, k: int) -> tuple[Any, Any]:
            hits = r.search(ExpandedQuery(text=text, k=k), k)
            return [h.chunk_id for h in hits], [h.score for h in hits]

        def reopen(r: BM25Retriever) -> None:
            r.load(CorpusSnapshot.of(chunks), tmp / f"plm_{pairing}")

        return Side("plm", build, query, reopen)

    if pairing == "stemmed":

        def build_raw() -> Any:
            tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
            r = bm25s.BM25(method="lucene", k1=1.5, b=0.75, dtype="float32")
            r.index(tokens, show_progress=False)
            r.save(str(tmp / "raw_bm25s"), show_progress=False)
            return r

        def query_raw(r: Any, text: str, k: int) -> tuple[Any, Any]:
            q = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
            q = [[t for t in q[0] if t in r.vocab_dict]]
            docs, scores = r.retrieve(q, k=k, show_progress=False, n_threads=1)
            return [ids[i] for i in docs[0]], scores[0].tolist()

        return [plm_side(tokenizer="bm25s_stem", method="lucene", dtype="float32"), Side("bm25s", build_raw, query_raw)]

    def build_okapi() -> Any:
        return rank_bm25.BM25Okapi([t.lower().split() for t in texts])

    def query_okapi(r: Any, text: str, k: int) -> tuple[Any, Any]:
        scores = r.get_scores(text.lower().split())
        order = np.argsort(scores)[::-1][:k]
        return [ids[i] for i in order], scores[order].tolist()

    plm = plm_side(tokenizer="whitespace_lower", method="rank_bm25_okapi")
    return [plm, Side("rank_bm25", build_okapi, query_okapi)]


def ndcg10(side: Side, queries: dict[str, str], qrels: list[Any], depth: int) -> float:
    run = []
    for qid, text in queries.items():
        docs, scores = side.query(text, depth)
        run += [ir_measures.ScoredDoc(qid, d, float(s)) for d, s in zip(docs, scores, strict=True)]
    return float(ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10])


def bench_pairing(pairing: str, args: argparse.Namespace, data: tuple[Any, ...]) -> dict[str, Any]:
    ids, texts, queries, qrels = data
    with tempfile.TemporaryDirectory() as tmpdir:
        sides = make_sides(pairing, ids, texts, Path(tmpdir))
        builds: dict[str, list[float]] = {s.name: [] for s in sides}
        qps: dict[str, list[float]] = {s.name: [] for s in sides}
        qtexts = list(queries.values())
        for rep in range(args.build_reps):
            for s in sides if rep % 2 == 0 else sides[::-1]:
                builds[s.name].append(s.build())
        for s in sides:
            s.query(qtexts[0], args.k)  # warm-up (numba JIT, mmap)
        passes = {s.name: _one_at_a_time(s, qtexts, args.k) for s in sides}
        if pairing == "stemmed":
            # bm25s at its best: every query in one retrieve() call; and plm on a version just
            # opened (the pass reopens the index first: no word's impacts kept yet).
            passes["bm25s batched"] = _bm25s_batched(sides[1].state, qtexts, args.k)
            passes["plm first pass"] = _one_at_a_time(sides[0], qtexts, args.k, reopen=True)
        qps.update({name: [] for name in passes})
        for rep in range(args.query_reps):  # every system once per round, in turns
            names = list(passes)
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                qps[name].append(passes[name]())
        quality = {s.name: ndcg10(s, queries, qrels, args.depth) for s in sides}
    a, b = (s.name for s in sides)
    if pairing == "stemmed":
        quality["bm25s batched"] = quality["plm first pass"] = quality[b]
        builds["bm25s batched"], builds["plm first pass"] = builds[b], builds[a]
    assert abs(quality[a] - quality[b]) < 1e-9, f"{pairing}: nDCG@10 differs: {quality}"
    row: dict[str, Any] = {"pairing": pairing, "peer": b}
    for name in quality:
        row[name] = {"build_s": min(builds[name]), "qps": statistics.median(qps[name]), "ndcg10": quality[name]}
    row["build_ratio"] = row[a]["build_s"] / row[b]["build_s"]
    row["qps_ratio"] = row[a]["qps"] / row[b]["qps"]
    if "bm25s batched" in row:  # medians of each round's ratio (the rounds' noise is shared)
        batched = qps["bm25s batched"]
        row["qps_ratio_batched"] = statistics.median(x / y for x, y in zip(qps[a], batched, strict=True))
        row["qps_ratio_first_pass_batched"] = statistics.median(
            x / y for x, y in zip(qps["plm first pass"], batched, strict=True)
        )
    return row


def _one_at_a_time(side: Side, qtexts: list[str], k: int, reopen: bool = False) -> Callable[[], float]:
    def run() -> float:
        if reopen:
            side.reopen()
        t0 = time.perf_counter()
        for text in qtexts:
            side.query(text, k)
        return len(qtexts) / (time.perf_counter() - t0)

    return run


def _bm25s_batched(raw: Any, qtexts: list[str], k: int) -> Callable[[], float]:
    stemmer = Stemmer.Stemmer("english")

    def run() -> float:
        t0 = time.perf_counter()
        q = bm25s.tokenize(qtexts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        raw.retrieve([[t for t in x if t in raw.vocab_dict] for x in q], k=k, show_progress=False, n_threads=1)
        return len(qtexts) / (time.perf_counter() - t0)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/scifact")
    ap.add_argument("--build-reps", type=int, default=3, help="builds per side; best is reported")
    ap.add_argument("--query-reps", type=int, default=5, help="rounds: passes over the queries per system; median QPS")
    ap.add_argument("-k", type=int, default=10, help="hits per query in the timed loop")
    ap.add_argument("--depth", type=int, default=100, help="hits per query for nDCG@10 (ties at 10 resolved by score)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    data = load_scifact(args.dataset)
    print(f"SciFact: {len(data[0])} docs, {len(data[2])} test queries; k={args.k}, single thread")
    rows = [bench_pairing(p, args, data) for p in ("stemmed", "whitespace")]
    print(f"{'pairing':<11} {'system':<10} {'build s':>8} {'QPS':>9} {'nDCG@10':>8}")
    for row in rows:
        for name in [n for n in row if isinstance(row[n], dict)]:
            r = row[name]
            print(f"{row['pairing']:<11} {name:<10} {r['build_s']:8.3f} {r['qps']:9.1f} {r['ndcg10']:8.4f}")
        ratios = f"build x{row['build_ratio']:.2f}  QPS x{row['qps_ratio']:.2f}"
        print(f"{'':<11} plm/{row['peer']:<6} {ratios}  nDCG equal: yes")
        if "qps_ratio_batched" in row:
            print(f"{'':<11} plm (one query a call) / bm25s batched QPS x{row['qps_ratio_batched']:.2f}")
            first = row["qps_ratio_first_pass_batched"]
            print(f"{'':<11} plm first pass on a just-opened version / bm25s batched QPS x{first:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
