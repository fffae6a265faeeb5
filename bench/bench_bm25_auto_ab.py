"""BM25 alone at a hybrid query's candidate counts: `top_k = "exhaustive"` against `"auto"`,
and `numpy` (exhaustive without the C kernel), in turns query by query in one process over
one index (a `bench_write.py --recipe hybrid` index), fresh bench_fresh vocabulary queries of
2-3 words; asserts all return the same hits.

    HF_HUB_OFFLINE=1 PLM_DATA_DIR=/tmp/plm-write-1m-hybrid/data \
        python bench/bench_bm25_auto_ab.py --work /tmp/plm-write-1m-hybrid --out result.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fresh import VOCAB  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("PLM_PROGRESS", "0")
    from plm_core.records import ExpandedQuery, Query
    from plm_index.commands import open_job
    from plm_plugins.retrievers.bm25s import BM25Retriever

    found: dict[str, Any] = {}
    search = BM25Retriever.search

    def grab(self: Any, query: Any, n: int, allowed: Any = None) -> Any:
        found[self.config.top_k] = self
        return search(self, query, n, allowed)

    BM25Retriever.search = grab  # type: ignore[method-assign]
    jobs = []  # (kept open)
    for mode in ("numpy", "exhaustive", "auto"):
        top_k = "exhaustive" if mode == "numpy" else mode
        jobs.append(
            open_job(
                args.work / "serve.toml", [f"query.retrieve.retrievers.bm25.top_k={top_k}"], None, args.work / "index"
            )
        )
        jobs[-1].open(create=False)
        jobs[-1].search(Query(text="warm up", k=10))
        if mode == "numpy":
            found["numpy"] = found.pop("exhaustive")
            found["numpy"]._compiled_top = lambda *a, **k: None  # the NumPy path alone
    BM25Retriever.search = search  # type: ignore[method-assign]
    rng, result = random.Random(11), {}
    for n in (100, 500, 10):
        lat: dict[str, list[float]] = {"exhaustive": [], "auto": [], "numpy": []}
        for i in range(args.queries):
            query = ExpandedQuery(text=" ".join(rng.choices(VOCAB, k=rng.randrange(2, 4))))
            hits = {}
            for mode in list(lat)[i % 3 :] + list(lat)[: i % 3]:
                t0 = time.perf_counter()
                hits[mode] = found[mode].search(query, n, None)
                lat[mode].append((time.perf_counter() - t0) * 1000)
            assert [h.chunk_id for h in hits["auto"]] == [h.chunk_id for h in hits["exhaustive"]]
            assert hits["numpy"] == hits["exhaustive"]
        for mode, values in lat.items():
            values.sort()
            result[f"n{n}_{mode}"] = {
                "p50_ms": round(values[len(values) // 2], 2),
                "p95_ms": round(values[int(len(values) * 0.95)], 2),
                "mean_ms": round(statistics.mean(values), 2),
            }
            print(n, mode, result[f"n{n}_{mode}"], flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
