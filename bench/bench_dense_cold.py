"""Dense cold start at scale: a new process opens a `dense` index of N chunks x 384 and
answers its first query, model load excluded (the embedder is loaded before the clock).

Sides, each a fresh process, rotated over --rounds rounds (median reported):
  rows    no saved vectors build: the index is rebuilt in memory from the store's rows
          (what every process did before the build existed: read N blobs from SQLite);
  mmap    the saved build (`vectors_<label>/`, after `Job.rebuild`) memory-mapped;
  numpy   the peer: raw `np.load(mmap_mode="r")` of the same matrix, one matmul, argpartition.
Also each side's first-query and warm-query latency (p50/p95 over 50 queries, k = 10).

The corpus is bench_scale.py's synthetic one, ingested BM25-only (no embedding: MiniLM
cannot embed a million texts here), then given seeded random unit vectors through
`store.write_vectors` under MiniLM's name, so the dense config's model check passes.

  PLM_PROGRESS=0 python bench/bench_dense_cold.py --size 1000000 --json bench/results/dense_cold_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import CONFIG as BM25_CONFIG  # noqa: E402
from bench_scale import make_corpus  # noqa: E402

DENSE_CONFIG = """
[job]
name = "dense_cold"
[embedder]
use = "sentence_transformers"
model = "all-MiniLM-L6-v2"
[query.embed]
use = "embed_query"
[query.retrieve]
use = "dense"
"""
PREPARE = """
import sys, numpy as np
from pathlib import Path
from plm_index.job import Job
bm25, dense, corpus, index = map(Path, sys.argv[1:5])
job = Job.from_config(bm25, index_dir=index)
job.ingest(corpus)
store = job.store
ids = store.chunk_ids()
rng = np.random.default_rng(0)
for start in range(0, len(ids), 100_000):
    part = ids[start:start + 100_000]
    m = rng.standard_normal((len(part), 384), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    store.write_vectors(part, m, "all-MiniLM-L6-v2")
job.close()
"""
SAVE_BUILD = """
import sys
from pathlib import Path
from plm_index.job import Job
job = Job.from_config(Path(sys.argv[1]), index_dir=Path(sys.argv[2]))
job.rebuild()
"""
COLD = """
import json, logging, shutil, sys, time
import numpy as np
from pathlib import Path
logging.disable(logging.WARNING)
from plm_index.job import Job
config, index, side = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
if side == "rows":  # hide the saved build: the index is rebuilt in memory from the store
    for build in index.glob("vectors-*"):
        build.rename(build.with_name(".hidden-" + build.name))
try:
    job = Job.from_config(config, index_dir=index)
    job.embedder.ensure_warm()  # model load excluded
    queries = [f"query number {i} about topic {i * 7 % 50}" for i in range(51)]
    vectors = [job.embedder.embed_query(q) for q in queries]
    t0 = time.perf_counter()
    job.search(queries[0], k=10)
    cold = time.perf_counter() - t0
    lat = []
    for q in queries[1:]:
        t0 = time.perf_counter()
        job.search(q, k=10)
        lat.append((time.perf_counter() - t0) * 1000)
    kind = type(job.searcher.indexes[0]._matrix).__name__
finally:
    for build in index.glob(".hidden-vectors-*"):
        build.rename(build.with_name(build.name[len(".hidden-"):]))
print(json.dumps({"cold_s": cold, "warm_ms": lat, "matrix": kind}))
"""
RAW = """
import json, sys, time
import numpy as np
path = sys.argv[1]
q = np.random.default_rng(1).standard_normal((51, 384), dtype=np.float32)
q /= np.linalg.norm(q, axis=1, keepdims=True)
t0 = time.perf_counter()
m = np.load(path, mmap_mode="r")
s = m @ q[0]
top = np.argpartition(-s, 10)[:10]
top = top[np.argsort(-s[top])]
cold = time.perf_counter() - t0
lat = []
for v in q[1:]:
    t0 = time.perf_counter()
    s = m @ v
    top = np.argpartition(-s, 10)[:10]
    top = top[np.argsort(-s[top])]
    lat.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"cold_s": cold, "warm_ms": lat}))
"""


def run(code: str, *args: Any) -> dict[str, Any]:
    # One BLAS thread on every side, as the plm command sets it (spinning threads are noise here).
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0"}
    argv = [sys.executable, "-c", code, *map(str, args)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/plm-dense-cold"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = args.work / str(args.size)
    work.mkdir(parents=True, exist_ok=True)
    bm25, dense, index = work / "bm25.toml", work / "dense.toml", work / "index"
    bm25.write_text(BM25_CONFIG)
    dense.write_text(DENSE_CONFIG)
    if not (index / "plm.sqlite").exists():
        corpus = work / "corpus.jsonl"
        make_corpus(args.size, corpus)
        run(PREPARE + "\nprint('{}')", bm25, dense, corpus, index)
        run(SAVE_BUILD + "\nprint('{}')", dense, index)
    vectors = next(index.glob("vectors-*/v*/vectors.npy"))
    results: dict[str, list[dict[str, Any]]] = {"rows": [], "mmap": [], "numpy": []}
    sides = list(results)
    for r in range(args.rounds):
        for side in sides[r % 3 :] + sides[: r % 3]:
            results[side].append(run(RAW, vectors) if side == "numpy" else run(COLD, dense, index, side))
    summary: dict[str, Any] = {"size": args.size, "dim": 384, "rounds": args.rounds, "sides": {}}
    print(f"{args.size:,} chunks x 384, {args.rounds} rounds (median of rounds)")
    print(f"{'side':<6} {'open + first query s':>21} {'warm p50 ms':>12} {'warm p95 ms':>12}")
    for side, runs in results.items():
        row = {
            "cold_s": statistics.median(x["cold_s"] for x in runs),
            "warm_p50_ms": statistics.median(pct(x["warm_ms"], 0.5) for x in runs),
            "warm_p95_ms": statistics.median(pct(x["warm_ms"], 0.95) for x in runs),
            "runs": runs,
        }
        summary["sides"][side] = row
        print(f"{side:<6} {row['cold_s']:21.3f} {row['warm_p50_ms']:12.1f} {row['warm_p95_ms']:12.1f}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
