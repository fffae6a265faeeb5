"""The `faiss` ANN retriever against exact search (numpy, and plm's `dense`), on synthetic
clustered vectors and on real MiniLM vectors. Two parts (`--parts` picks some):

  synthetic  N unit vectors of 384 dims (float32, seed 0): 1,000 Gaussian centres plus
             noise of the same norm, normalised; 200 queries drawn the same way (not stored
             vectors). For each N in --sizes: build time, index size (faiss.write_index's
             file), p50/p95 single-query latency (200 queries, k = 10; 3 passes rotating the
             order of the systems, median of the passes' p50 / p95) and recall@10 against
             the exact top 10, for numpy exact (matrix @ q, argpartition: the peer), plm's
             `dense` retriever (matrix @ q, full argsort, hits), and faiss flat, hnsw,
             hnsw+sq8, ivf, ivf+sq8, each as the raw faiss index and through plm's `faiss`
             retriever (its search parameters, exact re-scoring, hits). Each retriever
             is built by its own `build` (one segment, --build-threads OpenMP threads); the
             raw faiss index is that segment's.
  real       the stored MiniLM vectors of plm indexes (SciFact: configs/scifact/dense_minilm.toml
             over its 300 test queries; poc_needle: configs/experiments/dense_minilm.toml over
             needle + informed + realistic50), ingested first when the index is empty (the
             content cache under PLM_DATA_DIR makes that cheap when it is warm): recall@10 of
             each kind through plm's `faiss` retriever against `dense`, doc-level nDCG@10
             and p50 latency.

Queries run on one thread (OpenMP and BLAS), as bench_postgres.py's dense numbers: on a
2-core machine shared with other jobs a thread pool's wake-ups are the noise of a
sub-millisecond query.

  PLM_DATA_DIR=/tmp/plm-bench-data python bench/bench_faiss.py --sizes 100000 --json bench/results/faiss_100k.json
  PLM_DATA_DIR=/tmp/plm-bench-data python bench/bench_faiss.py --sizes 1000000 --parts synthetic \\
      --json bench/results/faiss_1m.json
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PLM_PROGRESS", "0")
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # faiss's build threads are set with omp_set_num_threads

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from plm_core.records import EmbeddedQuery  # noqa: E402
from plm_plugins.retrievers.dense import DenseRetriever  # noqa: E402
from plm_plugins.retrievers.faiss import FaissRetriever  # noqa: E402

DIM = 384
K = 10
KINDS: dict[str, dict[str, Any]] = {
    "flat": {"index": "flat"},
    "hnsw": {"index": "hnsw"},
    "hnsw+sq8": {"index": "hnsw", "quantizer": "sq8"},
    "ivf": {"index": "ivf"},
    "ivf+sq8": {"index": "ivf", "quantizer": "sq8"},
}


def load_faiss() -> Any:
    import faiss

    return faiss


# --------------------------------------------------------------------------- data
def unit(x: Any) -> Any:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def clustered(rows: int, queries: int, centres: int = 1000, seed: int = 0) -> tuple[Any, Any]:
    """Rows and queries: a random unit centre plus Gaussian noise of norm ~1, normalised."""
    rng = np.random.default_rng(seed)
    c = unit(rng.standard_normal((centres, DIM), dtype=np.float32))
    sigma = np.float32(1 / math.sqrt(DIM))
    out = np.empty((rows, DIM), dtype=np.float32)
    for start in range(0, rows, 100_000):
        stop = min(rows, start + 100_000)
        block = c[rng.integers(0, centres, stop - start)] + sigma * rng.standard_normal((stop - start, DIM), np.float32)
        out[start:stop] = unit(block)
    q = unit(c[rng.integers(0, centres, queries)] + sigma * rng.standard_normal((queries, DIM), np.float32))
    return out, q


def exact_top(matrix: Any, queries: Any, k: int = K) -> Any:
    """The exact top-k row ids per query (float32 inner products, as numpy computes them)."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(matrix), 100_000):
        s = queries @ matrix[start : start + 100_000].T
        part = np.argpartition(-s, min(k, s.shape[1] - 1), axis=1)[:, :k]
        best_s = np.concatenate([best_s, np.take_along_axis(s, part, 1)], axis=1)
        best_i = np.concatenate([best_i, part + start], axis=1)
    order = np.argsort(-best_s, axis=1)[:, :k]
    return np.take_along_axis(best_i, order, 1)


def recall(found: list[Any], truth: Any) -> float:
    return float(np.mean([len(set(map(int, f)) & set(t.tolist())) / len(t) for f, t in zip(found, truth, strict=True)]))


# --------------------------------------------------------------------------- systems
def numpy_search(matrix: Any) -> Callable[[Any], Any]:
    def search(q: Any) -> Any:
        s = matrix @ q
        top = np.argpartition(-s, K)[:K]
        return top[np.argsort(-s[top])]

    return search


def plm_search(retriever: Any) -> Callable[[Any], Any]:
    def search(q: Any) -> Any:
        return [int(h.chunk_id) for h in retriever.search(EmbeddedQuery(text="q", k=K, vector=q), K)]

    return search


def raw_faiss_search(retriever: FaissRetriever) -> Callable[[Any], Any]:
    faiss = load_faiss()

    c = retriever.config
    if c.index == "hnsw":
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(c.ef_search, K)
    elif c.index == "ivf":
        params = faiss.SearchParametersIVF()
        params.nprobe = c.nprobe
    else:
        params = faiss.SearchParameters()
    index = segment_index(retriever)

    def search(q: Any) -> Any:
        return index.search(q.reshape(1, -1), K, params=params)[1][0]

    return search


def built(retriever: Any, matrix: Any, doc_of: list[str] | None = None) -> float:
    """Build the retriever on these rows (chunk id = row number) as one segment, through its
    own `build`, as a sync's first build does; returns the seconds."""
    from plm_core.records import Chunk
    from plm_index.corpus import CorpusSnapshot

    chunks = [Chunk(id=str(i), doc_id=doc_of[i] if doc_of else str(i), text="") for i in range(len(matrix))]
    t0 = time.perf_counter()
    retriever.build(CorpusSnapshot.of(chunks, matrix), None)
    return time.perf_counter() - t0


def segment_index(retriever: FaissRetriever) -> Any:
    """The faiss index of the retriever's one segment."""
    assert retriever.state is not None and len(retriever.state.segments) == 1
    return retriever.state.segments[0].data.index


def index_bytes(index: Any) -> int:
    faiss = load_faiss()

    with tempfile.TemporaryDirectory(dir=os.environ.get("PLM_BENCH_TMP")) as tmp:
        path = os.path.join(tmp, "index.faiss")
        faiss.write_index(index, path)
        return os.path.getsize(path)


def latency(systems: dict[str, Callable[[Any], Any]], queries: Any, passes: int) -> dict[str, dict[str, float]]:
    """p50/p95 ms per system: `passes` passes rotating the order, median of the passes."""
    names = list(systems)
    runs: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for name in names:  # warm-up
        for q in queries[:10]:
            systems[name](q)
    for p in range(passes):
        for name in names[p % len(names) :] + names[: p % len(names)]:
            ms = []
            for q in queries:
                t = time.perf_counter()
                systems[name](q)
                ms.append((time.perf_counter() - t) * 1000)
            runs[name].append((float(np.percentile(ms, 50)), float(np.percentile(ms, 95))))
    return {
        n: {"p50_ms": statistics.median(r[0] for r in v), "p95_ms": statistics.median(r[1] for r in v)}
        for n, v in runs.items()
    }


# --------------------------------------------------------------------------- parts
def part_synthetic(args: argparse.Namespace, rows: int) -> dict[str, Any]:
    faiss = load_faiss()

    print(f"== synthetic {rows:,} x {DIM}", flush=True)
    t = time.perf_counter()
    matrix, queries = clustered(rows, args.queries)
    truth = exact_top(matrix, queries)
    print(f"  data + ground truth {time.perf_counter() - t:.1f} s", flush=True)
    dense = DenseRetriever()
    built(dense, matrix)
    out: dict[str, Any] = {"rows": rows, "dim": DIM, "queries": len(queries), "kinds": {}}
    systems: dict[str, Callable[[Any], Any]] = {"numpy exact": numpy_search(matrix), "plm dense": plm_search(dense)}
    out["kinds"]["numpy exact"] = {"bytes": int(matrix.nbytes), "build_s": 0.0}
    for name in args.kinds:
        retriever = FaissRetriever(label=name, exact_below=0, **KINDS[name])  # exact_below 0: the index answers
        faiss.omp_set_num_threads(args.build_threads)
        info = {"build_s": built(retriever, matrix), "factory": retriever.factory(rows)}
        faiss.omp_set_num_threads(1)
        print(f"  build {name}: {json.dumps(info)}", flush=True)
        out["kinds"][name] = {**info, "bytes": index_bytes(segment_index(retriever))}
        systems[f"faiss {name}"] = raw_faiss_search(retriever)
        systems[f"plm faiss {name}"] = plm_search(retriever)
    out["recall@10"] = {n: recall([s(q) for q in queries], truth) for n, s in systems.items()}
    print(f"  recall@10 {json.dumps(out['recall@10'])}", flush=True)
    out["latency"] = latency(systems, queries, args.passes)
    for n, v in out["latency"].items():
        print(f"  {n:24s} p50 {v['p50_ms']:8.3f} ms  p95 {v['p95_ms']:8.3f} ms  recall {out['recall@10'][n]:.3f}")
    return out


def real_vectors(config: Path, dataset: Path, query_sets: list[str]) -> tuple[Any, list[str], Any, list[str], Any]:
    """(matrix, chunk doc ids, query matrix, query ids, qrels) of a plm index over `dataset`."""
    from plm_core.settings import Settings
    from plm_eval.dataset import load_query_set, resolve_corpus
    from plm_index.job import Job

    job = Job.from_config(config, dataset=dataset, settings=Settings(progress=False))
    job.open()
    if not job.store.chunk_ids():
        t = time.perf_counter()
        job.ingest([resolve_corpus(job.config, dataset)])
        print(f"  ingested {dataset.name} into {job.index_dir} in {time.perf_counter() - t:.0f} s", flush=True)
    chunk_ids, matrix, _ = job.store.vectors()
    docs = {c.id: c.doc_id for c in job.store.chunks()}
    texts, qids, qrels = [], [], {}
    for name in query_sets:
        qs = load_query_set(dataset, name)
        for qid, text in qs.queries.items():
            qids.append(f"{name}/{qid}")
            texts.append(text)
            qrels[f"{name}/{qid}"] = qs.qrels[qid]
    assert job.embedder is not None
    queries = np.asarray(job.embedder.embed(texts), dtype=np.float32)
    job.close()
    return np.ascontiguousarray(matrix, dtype=np.float32), [docs[c] for c in chunk_ids], queries, qids, qrels


def ndcg10(doc_ranking: list[str], relevant: dict[str, int]) -> float:
    gains = [relevant.get(d, 0) for d in doc_ranking[:10]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def part_real(args: argparse.Namespace) -> dict[str, Any]:
    faiss = load_faiss()

    sets = [
        ("scifact", ROOT / "configs/scifact/dense_minilm.toml", args.datasets / "scifact", ["test"]),
        (
            "poc_needle",
            ROOT / "configs/experiments/dense_minilm.toml",
            args.datasets / "poc_needle",
            ["needle", "informed", "realistic50"],
        ),
    ]
    out: dict[str, Any] = {}
    for name, config, dataset, query_sets in sets:
        if not dataset.is_dir():
            print(f"== real {name}: {dataset} not found, skipped", flush=True)
            continue
        matrix, doc_of, queries, qids, qrels = real_vectors(config, dataset, query_sets)
        print(f"== real {name}: {matrix.shape[0]:,} chunks, {len(qids)} queries", flush=True)
        dense = DenseRetriever()
        built(dense, matrix, doc_of)
        retrievers: dict[str, Any] = {"dense": dense}
        faiss.omp_set_num_threads(args.build_threads)
        builds = {}
        for kind in args.kinds:
            r = FaissRetriever(label=kind, exact_below=0, **KINDS[kind])  # exact_below 0: the index answers
            builds[kind] = {"build_s": built(r, matrix, doc_of), "factory": r.factory(len(matrix))}
            retrievers[kind] = r
        faiss.omp_set_num_threads(1)
        res: dict[str, Any] = {"chunks": len(matrix), "queries": len(qids), "builds": builds, "kinds": {}}
        exact = [[int(h.chunk_id) for h in dense.search(EmbeddedQuery(text="q", k=K, vector=q), K)] for q in queries]
        systems = {n: plm_search(r) for n, r in retrievers.items()}
        lat = latency(systems, queries, args.passes)
        for kind, r in retrievers.items():
            top = [r.search(EmbeddedQuery(text="q", k=100, vector=q), 100) for q in queries]
            rec = recall([[int(h.chunk_id) for h in t[:K]] for t in top], np.array(exact))
            ndcgs = []
            for qid, hits in zip(qids, top, strict=True):
                seen: list[str] = []
                for h in hits:
                    if doc_of[int(h.chunk_id)] not in seen:
                        seen.append(doc_of[int(h.chunk_id)])
                ndcgs.append(ndcg10(seen, qrels[qid]))
            same = sum(t1 == t2 for t1, t2 in zip(([int(h.chunk_id) for h in t[:K]] for t in top), exact, strict=True))
            res["kinds"][kind] = {
                "recall@10": rec,
                "identical_top10": same,
                "ndcg@10": float(np.mean(ndcgs)),
                **lat[kind],
            }
            print(f"  {kind:10s} {json.dumps(res['kinds'][kind])}", flush=True)
        out[name] = res
    return out


# --------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="synthetic,real")
    ap.add_argument("--sizes", default="100000,1000000", help="synthetic corpus sizes (a,b)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"faiss kinds to measure, of {', '.join(KINDS)}")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--passes", type=int, default=3, help="latency passes (median reported)")
    ap.add_argument("--build-threads", type=int, default=2)
    ap.add_argument("--datasets", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.kinds = [k for k in args.kinds.split(",") if k]
    parts = set(args.parts.split(","))
    faiss = load_faiss()

    out: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "faiss": faiss.__version__,
            "load_avg_start": os.getloadavg(),
        },
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "command": " ".join(sys.argv),
    }

    def save() -> None:
        out["machine"]["load_avg_end"] = os.getloadavg()
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(out, indent=2, default=str) + "\n")

    if "synthetic" in parts:
        out["synthetic"] = {}
        for rows in (int(s) for s in args.sizes.split(",")):
            out["synthetic"][str(rows)] = part_synthetic(args, rows)
            save()
    if "real" in parts:
        out["real"] = part_real(args)
    save()


if __name__ == "__main__":
    main()
