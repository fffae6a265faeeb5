"""BM25 top k, one query a call, single thread: plm exhaustive (every posting of the query's
words scored), plm maxscore (`top_k = "maxscore"`: MaxScore in NumPy, the same hits), plm auto
(`top_k = "auto"`: the C kernel, its MaxScore where it pays), plm numpy (exhaustive without
the kernel), raw bm25s and Tantivy, in the same process, in turns (each round rotates the
order); the ratios are taken within each round, the table gives the medians over rounds. A
warm-up pass first meets every query word (plm keeps a version's impacts and each segment's
word bounds).

Tantivy is not a plm dependency: `.venv/bin/pip install tantivy` (0.27 here). It indexes the
text plm indexes, already tokenised by plm's tokenizer (bm25s_stem: bm25s's regex, English stop
words, Snowball stemmer) and joined by spaces, through its `whitespace` tokenizer, so both
index the same terms; its query is a boolean OR of the query's plm tokens (a repeated word
twice, as plm scores it), searched with count=False (counting every match would turn off its
block-max WAND). Tantivy's BM25 is Lucene's with k1 = 1.2 (fixed in tantivy-py); plm and raw
bm25s run lucene with k1 = 1.5, b = 0.75, float32: the speed compares, the scores differ a little.

    scifact: SciFact's corpus (title + text) and all its queries (queries.jsonl);
    scale:   bench/bench_scale.py's synthetic corpus (`make_corpus`, seeded) at --n documents
             and its 200 queries (the same generator and seed as its single-size run).

Usage:
    python bench/bench_bm25_topk.py scifact --rounds 5 --out bench/results/bm25_topk_scifact.json
    python bench/bench_bm25_topk.py scale --n 1000000 --rounds 3 --work /tmp/plm-topk \\
        --out bench/results/bm25_topk_1m.json

Before timing, every query's plm maxscore and auto hits (ids, scores, order) are checked against the
exhaustive path's; the run stops if one differs.
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bm25s  # noqa: E402
import numpy as np  # noqa: E402
import Stemmer  # noqa: E402

from plm_core.records import Chunk, ExpandedQuery  # noqa: E402
from plm_index.corpus import CorpusSnapshot  # noqa: E402
from plm_plugins.retrievers.bm25_impacts import compiled  # noqa: E402
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402

CONFIG: dict[str, Any] = {"tokenizer": "bm25s_stem", "method": "lucene", "k1": 1.5, "b": 0.75, "dtype": "float32"}
SLICE = 20_000
TOP_K: tuple[Any, ...] = ("exhaustive", "maxscore", "auto")


def load_scifact(root: Path) -> tuple[list[str], list[str], list[str]]:
    ids, texts = [], []
    for line in (root / "corpus.jsonl").open():
        rec = json.loads(line)
        ids.append(rec["_id"])
        texts.append(f"{rec.get('title') or ''} {rec['text']}".strip())
    queries = [json.loads(line)["text"] for line in (root / "queries.jsonl").open()]
    return ids, texts, queries


def load_scale(n: int, work: Path) -> tuple[list[str], list[str], list[str]]:
    from bench_scale import make_corpus

    folder = work / str(n)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = make_corpus(n, folder / "corpus.jsonl")
    rng = np.random.default_rng(11)  # bench_scale's queries for its first (here only) size
    queries = [" ".join(rng.choice(vocab[:5000], size=rng.integers(2, 6))) for _ in range(201)]
    ids, texts = [], []
    for line in (folder / "corpus.jsonl").open(encoding="utf-8"):
        rec = json.loads(line)
        ids.append(rec["_id"])
        texts.append(rec["text"])
    return ids, texts, queries[1:]  # bench_scale's first query is its cold start


def build_plm(chunks: list[Chunk], folder: Path, reuse: bool = False) -> tuple[list[BM25Retriever], float]:
    """plm's index built once, and opened by a retriever per `top_k` (each its own version: its
    own kept impacts)."""
    snapshot: Any = CorpusSnapshot.of(chunks)
    retrievers = [BM25Retriever(BM25Retriever.Config(**CONFIG, top_k=top_k)) for top_k in TOP_K]
    built = float("nan")  # not built in this run (--reuse)
    if not (reuse and folder.is_dir()):
        t0 = time.perf_counter()
        retrievers[0].build(snapshot, folder)
        built = time.perf_counter() - t0
    for r in retrievers[0 if math.isnan(built) else 1 :]:
        r.load(snapshot, folder)
    numpy = BM25Retriever(BM25Retriever.Config(**CONFIG, top_k="exhaustive"))
    numpy.load(snapshot, folder)
    numpy._compiled_top = lambda *a: None  # type: ignore[method-assign]  # the NumPy path alone
    numpy.numpy_only = True  # type: ignore[attr-defined]
    if compiled() is None:
        raise SystemExit("BM25's C kernel is not built (pip install -e . with a C compiler)")
    return [*retrievers, numpy], built


def build_raw(texts: list[str], stemmer: Any, folder: Path, reuse: bool = False) -> tuple[Any, float]:
    """Raw bm25s's index, in memory (saved too, for --reuse)."""
    if reuse and folder.is_dir():
        return bm25s.BM25.load(str(folder)), float("nan")
    t0 = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    raw = bm25s.BM25(method="lucene", k1=1.5, b=0.75, dtype="float32")
    raw.index(tokens, show_progress=False)
    built = time.perf_counter() - t0
    raw.save(str(folder), show_progress=False)
    return raw, built


def build_tantivy(
    retriever: BM25Retriever, texts: list[str], folder: Path, reuse: bool = False
) -> tuple[Any, Any, float]:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_unsigned_field("row", stored=True)
    sb.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    schema = sb.build()
    if reuse and (folder / "meta.json").is_file():
        return tantivy.Index(schema, path=str(folder)), schema, float("nan")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    index = tantivy.Index(schema, path=str(folder))
    t0 = time.perf_counter()
    writer = index.writer(heap_size=1 << 30, num_threads=1)
    for start in range(0, len(texts), SLICE):  # plm's tokens, a slice at a time
        for row, tokens in enumerate(retriever.tokenize(texts[start : start + SLICE]), start):
            writer.add_document(tantivy.Document(row=row, body=" ".join(tokens)))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index, schema, time.perf_counter() - t0


def systems(
    ids: list[str], plm: list[BM25Retriever], raw: Any, tv: tuple[Any, Any], stemmer: Any, k: int
) -> dict[str, Callable[[str], list[str]]]:
    import tantivy

    exhaustive = plm[0]
    index, schema = tv
    searcher = index.searcher()
    vocab = raw.vocab_dict

    def plm_query(r: BM25Retriever) -> Callable[[str], list[str]]:
        return lambda text: [h.chunk_id for h in r.search(ExpandedQuery(text=text, k=k), k)]

    def raw_query(text: str) -> list[str]:
        q = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        q = [[t for t in q[0] if t in vocab]]
        if not q[0]:
            return []
        docs, _ = raw.retrieve(q, k=k, show_progress=False, n_threads=1)
        return [ids[i] for i in docs[0]]

    def tantivy_query(text: str) -> list[Any]:
        tokens = exhaustive.tokenize([text])[0]
        terms = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in tokens]
        query = tantivy.Query.boolean_query(terms) if terms else tantivy.Query.empty_query()
        return searcher.search(query, k, count=False).hits

    return {
        **{f"plm {'numpy' if getattr(r, 'numpy_only', False) else r.config.top_k}": plm_query(r) for r in plm},
        "raw bm25s": raw_query,
        "tantivy": tantivy_query,
    }


def check_exact(plm: list[BM25Retriever], queries: list[str], k: int) -> int:
    """Every query's maxscore and auto hits are the exhaustive path's: ids, scores, order."""
    for text in queries:
        want = plm[0].search(ExpandedQuery(text=text, k=k), k)
        for r in plm[1:]:
            got = r.search(ExpandedQuery(text=text, k=k), k)
            if got != want:
                raise SystemExit(f"{r.config.top_k} differs from exhaustive on {text!r}:\n{got}\n{want}")
    return len(queries)


def tantivy_overlap(
    searcher: Any, exhaustive: BM25Retriever, ids: list[str], query: Callable, queries: list[str], k: int
):
    """Mean share of Tantivy's top k that is in plm's (they differ by k1 and float rounding)."""
    shares = []
    for text in queries:
        plm_ids = {h.chunk_id for h in exhaustive.search(ExpandedQuery(text=text, k=k), k)}
        got = [ids[searcher.doc(addr)["row"][0]] for _, addr in query(text)]
        if plm_ids or got:
            shares.append(len(plm_ids & set(got)) / max(len(plm_ids), len(got)))
    return statistics.mean(shares) if shares else 1.0


def timed(run: Callable[[str], Any], queries: list[str]) -> list[float]:
    lat = []
    for text in queries:
        t0 = time.perf_counter()
        run(text)
        lat.append(time.perf_counter() - t0)
    return lat


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", choices=["scifact", "scale"])
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared/datasets/scifact")
    ap.add_argument("--n", type=int, default=1_000_000, help="scale: documents")
    ap.add_argument("--work", type=Path, default=Path("/tmp/plm-topk"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--reuse", action="store_true", help="open the indexes a run left in --work (build: nan)")
    args = ap.parse_args()
    ids, texts, queries = load_scifact(args.dataset) if args.corpus == "scifact" else load_scale(args.n, args.work)
    name = "scifact" if args.corpus == "scifact" else str(args.n)
    work = args.work / f"run-{name}"
    print(f"{name}: {len(texts)} documents, {len(queries)} queries, k={args.k}, one query a call", flush=True)
    stemmer = Stemmer.Stemmer("english")
    chunks = [Chunk(id=i, doc_id=i, text=t) for i, t in zip(ids, texts, strict=True)]
    plm, plm_build = build_plm(chunks, work / "plm", args.reuse)
    exhaustive = plm[0]
    print(f"plm build {plm_build:.1f}s", flush=True)
    raw, raw_build = build_raw(texts, stemmer, work / "raw_bm25s", args.reuse)
    print(f"raw bm25s build {raw_build:.1f}s", flush=True)
    index, schema, tv_build = build_tantivy(exhaustive, texts, work / "tantivy", args.reuse)
    print(f"tantivy build {tv_build:.1f}s (plm's tokens)", flush=True)
    del texts
    checked = check_exact(plm, queries, args.k)
    print(f"maxscore and auto == exhaustive on all {checked} queries (ids, scores, order)", flush=True)
    runs = systems(ids, plm, raw, (index, schema), stemmer, args.k)
    overlap = tantivy_overlap(index.searcher(), exhaustive, ids, runs["tantivy"], queries, args.k)
    for run in runs.values():  # warm-up: every word met once (plm keeps impacts and blocks per version)
        timed(run, queries)
    names = list(runs)
    lat: dict[str, list[list[float]]] = {s: [] for s in names}
    for r in range(args.rounds):
        for s in names[r % len(names) :] + names[: r % len(names)]:
            lat[s].append(timed(runs[s], queries))
        print(
            f"round {r + 1}: " + ", ".join(f"{s} {len(queries) / sum(lat[s][-1]):.0f} QPS" for s in names), flush=True
        )
    rows: dict[str, Any] = {}
    for s in names:
        rows[s] = {
            "qps": statistics.median(len(queries) / sum(x) for x in lat[s]),
            "p50_ms": statistics.median(pct(x, 0.5) for x in lat[s]),
            "p95_ms": statistics.median(pct(x, 0.95) for x in lat[s]),
            "qps_per_round": [len(queries) / sum(x) for x in lat[s]],
        }
    for s in names:  # within a round, then the median over rounds
        rows[s]["qps_vs_tantivy"] = statistics.median(
            sum(t) / sum(x) for x, t in zip(lat[s], lat["tantivy"], strict=True)
        )
        rows[s]["qps_vs_plm_exhaustive"] = statistics.median(
            sum(e) / sum(x) for x, e in zip(lat[s], lat["plm exhaustive"], strict=True)
        )
    result = {
        "corpus": name,
        "documents": len(ids),
        "queries": len(queries),
        "k": args.k,
        "rounds": args.rounds,
        "build_s": {  # null: reopened (--reuse), not built in this run
            name: None if math.isnan(took) else took
            for name, took in (("plm", plm_build), ("raw bm25s", raw_build), ("tantivy", tv_build))
        },
        "maxscore_exact_queries": checked,
        "tantivy_top_k_overlap_with_plm": overlap,
        "systems": rows,
    }
    print(f"{'system':<16} {'QPS':>8} {'p50 ms':>8} {'p95 ms':>8} {'x tantivy':>10} {'x exhaustive':>13}")
    for s in names:
        r = rows[s]
        print(
            f"{s:<16} {r['qps']:8.0f} {r['p50_ms']:8.3f} {r['p95_ms']:8.3f} "
            f"{r['qps_vs_tantivy']:10.2f} {r['qps_vs_plm_exhaustive']:13.2f}"
        )
    print(f"tantivy's top {args.k} shared with plm's: {overlap:.3f} (k1 1.2 vs 1.5)")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
