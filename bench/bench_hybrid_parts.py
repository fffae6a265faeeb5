"""Where a hybrid query's milliseconds go, in-process, over a `bench_write.py --recipe hybrid`
index: each part timed by wrapping it (the query embedding, BM25, faiss's graph search and
its exact rescoring, fusion, the hits read from the store, collapse), fresh query texts for
every query (the embedder remembers recent ones), and the ONNX query embedding alone, back
to back and with a 5 ms pause between queries, as a served query has.

    HF_HUB_OFFLINE=1 python bench/bench_hybrid_parts.py --work /tmp/plm-write-1m-hybrid

`--set KEY=VALUE` (repeat) overrides the recipe as `plm query --set` does, e.g.
`--set query.retrieve.fuser.default.candidates_factor=2`; `--json PATH` keeps every round.
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
    ap.add_argument("--config", default="serve.toml", help="the recipe in --work to query (default serve.toml)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE override (repeat)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every round's numbers here")
    args = ap.parse_args()
    os.environ.setdefault("PLM_PROGRESS", "0")
    from plm_core.records import Query
    from plm_index.commands import open_job
    from plm_index.search import CorpusView
    from plm_plugins.fusers.profiles import ProfiledFuser
    from plm_plugins.retrievers.bm25s import BM25Retriever
    from plm_plugins.retrievers.faiss import FaissRetriever

    took: dict[str, list[float]] = {}

    def timed(cls: Any, method: str, label: str) -> None:
        inner = getattr(cls, method)

        def wrapper(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                took.setdefault(label, []).append((time.perf_counter() - t0) * 1000)

        setattr(cls, method, wrapper)

    for cls, method, label in [
        (BM25Retriever, "search", "bm25"),
        (FaissRetriever, "search", "faiss (all)"),
        (FaissRetriever, "_ann", "faiss graph"),
        (FaissRetriever, "_ranked", "faiss ranked"),
        (ProfiledFuser, "fuse_top", "fuse"),
        (CorpusView, "hits", "hits"),
    ]:
        timed(cls, method, label)
    job = open_job(args.work / args.config, args.overrides, None, args.work / "index")
    job.open(create=False)
    rng = random.Random(7)

    def fresh(tag: str) -> list[str]:
        return [" ".join(rng.choices(VOCAB, k=rng.randrange(2, 4))) + f" {tag}{i}" for i in range(args.queries)]

    for text in fresh("warm")[:100]:
        job.search(Query(text=text, k=10))
    result: dict[str, Any] = {"config": args.config, "set": args.overrides, "queries": args.queries, "rounds": []}
    for rnd in range(args.rounds):
        took.clear()
        total = []
        cpu0 = time.process_time()
        for text in fresh(f"r{rnd}-"):
            t0 = time.perf_counter()
            _, stages = job.search(Query(text=text, k=10))
            total.append((time.perf_counter() - t0) * 1000)
            for name, seconds in stages.items():
                took.setdefault(f"stage {name}", []).append(seconds * 1000)
        cpu = (time.process_time() - cpu0) * 1000 / len(total)
        parts = ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in took.items())
        total.sort()
        result["rounds"].append(
            {
                "p50_ms": round(total[len(total) // 2], 2),
                "p95_ms": round(total[int(len(total) * 0.95)], 2),
                "cpu_ms_per_query": round(cpu, 2),
                "part_medians_ms": {k: round(statistics.median(v), 3) for k, v in took.items()},
            }
        )
        print(
            f"round {rnd + 1}: query p50 {total[len(total) // 2]:.1f} ms, p95 {total[int(len(total) * 0.95)]:.1f} ms, "
            f"CPU {cpu:.1f} ms a query (all threads); "
            f"medians (ms): {parts}",
            flush=True,
        )
    embedder = job.searcher.embedder
    for label, pause in (("back to back", 0.0), ("5 ms apart", 0.005)):
        lat = []
        for text in fresh(label[:4]):
            t0 = time.perf_counter()
            embedder.embed_query(text)
            lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(pause)
        lat.sort()
        result[f"embed_alone_{label.replace(' ', '_')}"] = {
            "p50_ms": round(lat[len(lat) // 2], 2),
            "p95_ms": round(lat[int(len(lat) * 0.95)], 2),
        }
        print(
            f"query embedding alone, {label}: p50 {lat[len(lat) // 2]:.2f} ms, p95 {lat[int(len(lat) * 0.95)]:.2f} ms"
        )

    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
