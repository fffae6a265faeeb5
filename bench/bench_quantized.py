"""Quantised vectors with exact rescoring (issue 46 item 4): `dense` with quantize = "int8"
or "binary", and `faiss` with quantizer = "sq8" or "binary", against exact `dense`, in one run.

Quality, on a real index's vectors (all-MiniLM-L6-v2, from its store) and the dataset's
judged queries (embedded by the same model on ONNX Runtime): recall@10 of the chunks
against the exact top 10 (10 hits asked: oversample x 10 candidates, at least 100), and the
doc-level nDCG@10 of dense retrieval alone (100 chunks asked), exact and quantised, for
oversample 10, 20 and 40. The candidate search is `plm_plugins.retrievers.
dense`'s own (`quantized`, `approximate`, then exact float32 scores of the candidates).
`faiss` is the retriever itself (FaissRetriever, exact_below 0: its index answers) built on
the same vectors: HNSW float32, HNSW sq8, and HNSW binary at oversample 10, 20 and 40.

Speed and memory at `--rows` (default 1,000,000) synthetic 384-dimension vectors in
clusters (no real corpus of a million embeddings exists here): the float32 rows and the
codes are saved as segment files and memory-mapped, as the stage does; each method runs in
its own process: per query, milliseconds (median, p95) over `--queries-speed` queries,
and the process's resident memory after them (anonymous, and file-backed pages of the
memory-mapped files, which the kernel may drop).

`--speed retrievers` measures the stages themselves instead of the candidate functions:
each method's segment is built by its retriever (one segment of `--rows` rows, the build
timed) and opened by `load` in a fresh process, as a server does; queries ask for 10 and
for 100 hits (the recommended recipe asks each retriever for 100), after 5 untimed ones;
recall@10 against `dense`'s exact hits. `--methods` picks some of RETRIEVERS.

    HF_HUB_OFFLINE=1 PLM_DATA_DIR=/tmp/plm-bench-data python bench/bench_quantized.py \\
        --store /tmp/plm-bench-data/recommended-poc_needle/plm.sqlite \\
        --dataset ../shared/datasets/poc_needle --queries informed,needle,realistic50 \\
        --rows 1000000 --json bench/results/quantized.json
    HF_HUB_OFFLINE=1 python bench/bench_quantized.py --rows 1000000 --speed retrievers \\
        --queries-speed 100 --json bench/results/quantized_faiss_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from plm_plugins.retrievers.dense import approximate, quantized, similarities

OVERSAMPLE = (10, 20, 40)
DEPTH = 100  # chunks retrieved per query, for the doc ranking
FAISS_QUALITY: dict[str, dict[str, Any]] = {
    "faiss_hnsw": {"index": "hnsw"},
    "faiss_hnsw_sq8": {"index": "hnsw", "quantizer": "sq8"},
    **{f"faiss_hnsw_binary_x{o}": {"index": "hnsw", "quantizer": "binary", "oversample": o} for o in OVERSAMPLE},
}
# --speed retrievers: (stage, config); methods sharing a config share its build
RETRIEVERS: dict[str, tuple[str, dict[str, Any]]] = {
    "dense": ("dense", {}),
    "dense_binary_x10": ("dense", {"quantize": "binary", "oversample": 10}),
    "faiss_hnsw": ("faiss", {"index": "hnsw"}),
    "faiss_hnsw_binary_x10": ("faiss", {"index": "hnsw", "quantizer": "binary", "oversample": 10}),
    "faiss_hnsw_binary_x40": ("faiss", {"index": "hnsw", "quantizer": "binary", "oversample": 40}),
    "faiss_flat_binary_x10": ("faiss", {"index": "flat", "quantizer": "binary", "oversample": 10}),
}


def load_store(path: Path) -> tuple[list[str], list[str], Any]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT c.id, c.doc_id, v.vector FROM chunks c JOIN vectors v ON v.chunk_id = c.id ORDER BY c.row"
    ).fetchall()
    matrix = np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
    return [r[0] for r in rows], [r[1] for r in rows], matrix


def queries_of(dataset: Path, names: list[str]) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    from plm_eval.dataset import load_query_set

    texts: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for name in names:
        qset = load_query_set(dataset, name)
        texts.update({f"{name}:{q}": t for q, t in qset.queries.items()})
        qrels.update({f"{name}:{q}": r for q, r in qset.qrels.items()})
    return texts, qrels


def embed(texts: dict[str, str]) -> Any:
    from plm_core.settings import load_settings
    from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(backend="onnx", settings=load_settings())
    return np.stack([embedder.embed_query(t) for t in texts.values()])


def top(matrix: Any, vector: Any, n: int, data: Any = None, oversample: int = 0) -> Any:
    """The n best rows: exact over every row, or from `oversample` x n candidates of the codes."""
    if data is None:
        scores = similarities(matrix, vector)
        rows = np.argpartition(-scores, n - 1)[:n]
    else:
        m = min(len(matrix), max(n * oversample, 100))
        rows = np.sort(np.argpartition(-approximate(data, vector), m - 1)[:m])
        scores = np.zeros(len(matrix), dtype=np.float32)
        scores[rows] = similarities(matrix[rows], vector)
    return rows[np.lexsort((-rows, -scores[rows]))][:n]


def doc_run(rows: Any, docs: list[str]) -> list[str]:
    return list(dict.fromkeys(docs[r] for r in rows))


def quality(args: argparse.Namespace) -> dict[str, Any]:
    from plm_eval.evaluators.ir_metrics import ir_scores

    ids, docs, matrix = load_store(args.store)
    texts, qrels = queries_of(args.dataset, args.queries.split(","))
    vectors = embed(texts)
    keys = list(texts)
    exact = {k: top(matrix, v, DEPTH) for k, v in zip(keys, vectors, strict=True)}
    exact10 = {k: top(matrix, v, 10) for k, v in zip(keys, vectors, strict=True)}
    out: dict[str, Any] = {"rows": len(ids), "queries": len(keys), "store": str(args.store)}
    base = ir_scores({k: doc_run(r, docs) for k, r in exact.items()}, qrels, ["nDCG@10"])["nDCG@10"]
    out["exact"] = {"nDCG@10": round(statistics.fmean(base.values()), 4)}
    for kind in ("int8", "binary"):
        data = quantized(matrix, kind)
        for over in OVERSAMPLE:
            got = {k: top(matrix, v, DEPTH, data, over) for k, v in zip(keys, vectors, strict=True)}
            got10 = {k: top(matrix, v, 10, data, over) for k, v in zip(keys, vectors, strict=True)}
            recall = statistics.fmean(len(set(got10[k]) & set(exact10[k])) / 10 for k in keys)
            ndcg = ir_scores({k: doc_run(r, docs) for k, r in got.items()}, qrels, ["nDCG@10"])["nDCG@10"]
            out[f"{kind}_x{over}"] = {
                "recall@10": round(recall, 4),
                "nDCG@10": round(statistics.fmean(ndcg.values()), 4),
            }
            print(kind, over, out[f"{kind}_x{over}"], file=sys.stderr, flush=True)
    for name, config in FAISS_QUALITY.items():
        retriever = faiss_of(matrix, docs, config)
        got = {k: retriever_rows(retriever, v, DEPTH) for k, v in zip(keys, vectors, strict=True)}
        got10 = {k: retriever_rows(retriever, v, 10) for k, v in zip(keys, vectors, strict=True)}
        recall = statistics.fmean(len(set(got10[k]) & set(exact10[k])) / 10 for k in keys)
        ndcg = ir_scores({k: doc_run(r, docs) for k, r in got.items()}, qrels, ["nDCG@10"])["nDCG@10"]
        out[name] = {"recall@10": round(recall, 4), "nDCG@10": round(statistics.fmean(ndcg.values()), 4)}
        print(name, out[name], file=sys.stderr, flush=True)
    return out


def faiss_of(matrix: Any, docs: list[str], config: dict[str, Any]) -> Any:
    """plm's `faiss` retriever built on these rows (chunk id = row), its index answering."""
    from plm_core.records import Chunk
    from plm_index.corpus import CorpusSnapshot
    from plm_plugins.retrievers.faiss import FaissRetriever

    chunks = [Chunk(id=str(i), doc_id=d, text="") for i, d in enumerate(docs)]
    retriever = FaissRetriever(exact_below=0, **config)
    retriever.build(CorpusSnapshot.of(chunks, matrix), None)
    return retriever


def retriever_rows(retriever: Any, vector: Any, n: int) -> Any:
    from plm_core.records import EmbeddedQuery

    hits = retriever.search(EmbeddedQuery(text="q", k=n, vector=np.asarray(vector, dtype=np.float32)), n)
    return np.array([int(h.chunk_id) for h in hits], dtype=np.int64)


CHILD = """
import json, statistics, sys, time
import numpy as np
from plm_plugins.retrievers.dense import Quantized
sys.path.insert(0, {bench!r})
from bench_quantized import top
folder, method, n_queries = {folder!r}, {method!r}, {n_queries}
matrix = np.load(folder + "/vectors.npy", mmap_mode="r")
data = None
if method != "exact":
    from plm_plugins.retrievers.dense import read_at_random
    read_at_random(matrix)  # as the stage does for a quantised segment
if method != "exact":
    kind, over = method.split("_x")
    codes = np.load(folder + f"/codes_{{kind}}.npy", mmap_mode="r")
    scales = np.load(folder + "/scales.npy", mmap_mode="r") if kind == "int8" else None
    data = Quantized(matrix, codes, scales)
queries = np.load(folder + "/queries.npy")[:n_queries]
times, found = [], []
for q in queries:
    t0 = time.perf_counter()
    rows = top(matrix, q, 10, data, int(over) if data is not None else 0)
    times.append(1000 * (time.perf_counter() - t0))
    found.append(rows.tolist())
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
mb = lambda key: round(int(status[key].split()[0]) / 1024, 1)
p95 = sorted(times)[int(0.95 * len(times))]
print(json.dumps({{"ms_p50": round(statistics.median(times), 2), "ms_p95": round(p95, 2),
                  "rss_anon_mb": mb("RssAnon"), "rss_file_mb": mb("RssFile"), "found": found}}))
"""


def synthetic(work: Path, n: int, n_queries: int) -> None:
    """`n` clustered unit rows of 384 dimensions (vectors.npy) and queries near some of them."""
    rng = np.random.default_rng(0)
    d = 384
    centres = rng.normal(size=(max(1, n // 1000), d)).astype(np.float32)
    matrix = np.lib.format.open_memmap(work / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, d))
    for lo in range(0, n, 100_000):  # in blocks: a million rows at once would need twice the memory
        hi = min(n, lo + 100_000)
        block = centres[rng.integers(0, len(centres), hi - lo)] + 0.6 * rng.normal(size=(hi - lo, d)).astype(np.float32)
        matrix[lo:hi] = block / np.linalg.norm(block, axis=1, keepdims=True)
    matrix.flush()
    picks = rng.integers(0, n, n_queries)
    queries = np.asarray(matrix[picks]) + 0.3 * rng.normal(size=(len(picks), d)).astype(np.float32)
    np.save(work / "queries.npy", (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32))


def speed(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="plm-bench-quantized-"))
    n, d = args.rows, 384
    synthetic(work, n, args.queries_speed)
    matrix = np.load(work / "vectors.npy", mmap_mode="r")
    for kind in ("int8", "binary"):
        parts = [quantized(np.asarray(matrix[lo : lo + 100_000]), kind) for lo in range(0, n, 100_000)]
        np.save(work / f"codes_{kind}.npy", np.concatenate([p.codes for p in parts]))
        if kind == "int8":
            np.save(work / "scales.npy", np.concatenate([p.scales for p in parts]))
    del matrix
    out: dict[str, Any] = {"rows": n, "dim": d, "bytes": {}}
    for name in ("vectors.npy", "codes_int8.npy", "scales.npy", "codes_binary.npy"):
        out["bytes"][name] = (work / name).stat().st_size
    truth = None
    for method in ["exact", *(f"{k}_x{o}" for k in ("int8", "binary") for o in OVERSAMPLE)]:
        code = CHILD.format(
            bench=str(Path(__file__).parent), folder=str(work), method=method, n_queries=args.queries_speed
        )
        res = json.loads(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        )
        found = res.pop("found")
        if method == "exact":
            truth = found
        else:
            res["recall@10"] = round(
                statistics.fmean(len(set(a) & set(b)) / 10 for a, b in zip(found, truth, strict=True)), 4
            )
        out[method] = res
        print(method, res, file=sys.stderr, flush=True)
    for p in work.iterdir():
        p.unlink()
    work.rmdir()
    return out


STAGE_CHILD = """
import json, sys
sys.path.insert(0, {bench!r})
from bench_quantized import run_stage
print(json.dumps(run_stage({folder!r}, {method!r}, {n_queries}, {rows}, {cold})))
"""


def run_stage(folder: str, method: str, n_queries: int, rows: int, cold: bool) -> dict[str, Any]:
    """In a fresh process: open the method's saved index, then time queries. Warm: k 10 and
    100, after 5 untimed queries each, with the files as the build left them (in the page
    cache). Cold: every file of the index dropped from the page cache after the open (its
    checksums read them all), then k 10 only: what the queries themselves make resident."""
    import time

    from plm_core.records import EmbeddedQuery

    retriever = stage(method)
    t0 = time.perf_counter()
    retriever.load(snapshot_of(rows), Path(folder) / "index")
    out: dict[str, Any] = {"open_s": round(time.perf_counter() - t0, 3)}
    segments = retriever.stage_base(Path(folder) / "index") / "segments"
    if cold:
        for path in segments.glob("*/*"):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages not mapped yet: dropped
            os.close(fd)
    queries = np.load(Path(folder) / "queries.npy")[:n_queries]
    for k in (10,) if cold else (10, 100):
        for q in [] if cold else queries[:5]:  # untimed: the first queries page in what every query uses
            retriever.search(EmbeddedQuery(text="q", k=k, vector=q), k)
        times, found = [], []
        for q in queries:
            t0 = time.perf_counter()
            hits = retriever.search(EmbeddedQuery(text="q", k=k, vector=q), k)
            times.append(1000 * (time.perf_counter() - t0))
            found.append([int(h.chunk_id) for h in hits[:10]])
        p95 = sorted(times)[int(0.95 * len(times))]
        out[f"k{k}"] = {"ms_p50": round(statistics.median(times), 2), "ms_p95": round(p95, 2)}
        if k == 10:
            out["found"] = found
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    out["rss_anon_mb"] = round(int(status["RssAnon"].split()[0]) / 1024, 1)
    out["rss_file_mb"] = round(int(status["RssFile"].split()[0]) / 1024, 1)
    out["rss_by_file_mb"] = resident_by_file(str(segments))
    return out


def resident_by_file(under: str) -> dict[str, float]:
    """MB of each memory-mapped file under `under` resident in this process (/proc/self/smaps)."""
    found: dict[str, float] = {}
    name = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if len(head) >= 5 and "-" in head[0] and ":" in head[3]:  # a mapping's first line
            name = head[5].rsplit("/", 1)[-1] if len(head) >= 6 and head[5].startswith(under) else None
        elif name is not None and head and head[0] == "Rss:":
            found[name] = round(found.get(name, 0.0) + int(head[1]) / 1024, 1)
    return found


def stage(method: str) -> Any:
    """A new, unbuilt retriever for one of RETRIEVERS."""
    from plm_plugins.retrievers.dense import DenseRetriever
    from plm_plugins.retrievers.faiss import FaissRetriever

    kind, config = RETRIEVERS[method]
    if kind == "dense":
        return DenseRetriever(label="dense", **config)
    return FaissRetriever(label="dense", exact_below=0, **config)


def snapshot_of(rows: int, vectors: Any = None) -> Any:
    """A snapshot of `rows` chunks (ids "0", "1", ...) in memory, without a million Chunk
    objects: what `build` reads (ids, texts, vectors), or with no vectors what `load` checks."""
    from plm_index.corpus import CorpusSnapshot

    snap = CorpusSnapshot.of([], None)
    snap.__dict__.update(position=rows, n_chunks=rows, vectors=vectors)
    if vectors is not None:
        snap.__dict__.update(chunk_ids=[str(i) for i in range(rows)], index_texts=[""] * rows)
    return snap


def speed_retrievers(args: argparse.Namespace) -> dict[str, Any]:
    """Build each method's index (once per build setting; kept in `--work` when given, and
    reused by a later run), then time it in fresh processes, warm and cold."""
    import time

    work = args.work or Path(tempfile.mkdtemp(prefix="plm-bench-quantized-"))
    work.mkdir(parents=True, exist_ok=True)
    n = args.rows
    if not (work / "queries.npy").is_file() or len(np.load(work / "vectors.npy", mmap_mode="r")) != n:
        synthetic(work, n, args.queries_speed)
    out: dict[str, Any] = {"rows": n, "dim": 384, "methods": {}}
    builds: dict[str, dict[str, Any]] = {}
    for method in args.methods.split(","):
        retriever = stage(method)
        settings = json.dumps([RETRIEVERS[method][0], retriever.segment_settings()], sort_keys=True)
        if settings not in builds:  # oversample is a search setting: one build serves them all
            snap = snapshot_of(n, np.load(work / "vectors.npy", mmap_mode="r"))
            build_s = None  # reused from an earlier run
            if not retriever.is_current(snap.version, work / "index"):
                t0 = time.perf_counter()
                retriever.build(snap, work / "index")
                build_s = round(time.perf_counter() - t0, 1)
            (folder,) = (retriever.stage_base(work / "index") / "segments").iterdir()
            files = {p.name: p.stat().st_size for p in sorted(folder.iterdir())}
            builds[settings] = {"build_s": build_s, "files": files}
            print(method, "built", builds[settings], file=sys.stderr, flush=True)
            del retriever, snap
        res: dict[str, Any] = {**builds[settings]}
        for cold in (False, True):
            code = STAGE_CHILD.format(
                bench=str(Path(__file__).parent),
                folder=str(work),
                method=method,
                n_queries=args.queries_speed,
                rows=n,
                cold=cold,
            )
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{method}: {done.stderr}")
            res["cold" if cold else "warm"] = json.loads(done.stdout.strip().splitlines()[-1])
            res["cold" if cold else "warm"]["load_1min"] = round(os.getloadavg()[0], 2)
        out["methods"][method] = res
    truth = out["methods"].get("dense", {}).get("warm", {}).get("found")
    for method, res in out["methods"].items():
        for part in ("warm", "cold"):
            found = res[part].pop("found")
            if truth is not None:
                res[part]["recall@10"] = round(
                    statistics.fmean(len(set(a) & set(b)) / 10 for a, b in zip(found, truth, strict=True)), 4
                )
        print(method, json.dumps(res), file=sys.stderr, flush=True)
    if args.work is None:
        shutil.rmtree(work)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, help="a plm.sqlite holding a real index's chunks and vectors")
    ap.add_argument("--dataset", type=Path, help="its BEIR-layout dataset (queries and qrels)")
    ap.add_argument("--queries", default="test", help="query sets, a,b")
    ap.add_argument("--rows", type=int, default=1_000_000, help="synthetic rows for speed (0: skip)")
    ap.add_argument("--queries-speed", type=int, default=100)
    ap.add_argument("--speed", choices=["codes", "retrievers"], default="codes", help="what --rows measures")
    ap.add_argument("--methods", default=",".join(RETRIEVERS), help="--speed retrievers: some of RETRIEVERS, a,b")
    ap.add_argument("--work", type=Path, help="--speed retrievers: a folder kept for its vectors and indexes")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_1min": os.getloadavg()[0]}}
    if args.store:
        result["quality"] = quality(args)
    if args.rows:
        result["speed"] = speed(args) if args.speed == "codes" else speed_retrievers(args)
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
