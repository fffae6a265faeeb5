"""Query latency of several recipes over the same dataset, in one process, interleaved.

Each config's index is the one `plm eval --dataset D` built (run that first; this script
never ingests). Every query of the given sets is asked of every config in turn, round
after round, so the machine's noise falls on all of them alike; the query embedding is
recomputed each time (the embedder's memo of recent queries is cleared), so latency is
what a new query costs end to end: expand + embed + retrieve + fuse + later stages.

    HF_HUB_OFFLINE=1 python bench/bench_recipes.py --dataset ../shared/datasets/poc_needle \
        --queries needle,informed,realistic50 --config configs/poc_parity.toml \
        --config configs/recommended.toml --rounds 3 [--json out.json]

Prints p50 / p95 / mean ms per config (median over rounds), of the whole search and of
the rest once the query embedding is taken out, and each p95's ratio to the first config's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from plm_core.config import load_job
from plm_core.records import Query
from plm_core.settings import load_settings
from plm_eval.dataset import load_query_set
from plm_eval.eval_command import config_labels, eval_index_dirs
from plm_index.job import Job
from plm_index.plugins import default_registry


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", required=True, type=Path)
    ap.add_argument("--dataset", required=True, type=Path)
    ap.add_argument("--queries", default="test")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    settings, registry = load_settings(), default_registry()
    configs = [load_job(p, registry) for p in args.config]
    labels = config_labels(args.config)
    jobs = []
    for cfg, index_dir in zip(configs, eval_index_dirs(configs, settings.data_dir, args.dataset), strict=True):
        if not index_dir.is_dir():
            raise SystemExit(f"{cfg.path}: no index at {index_dir}; run `plm eval --config {cfg.path} --dataset ...`")
        shared = next((j.embedder for j in jobs if j.config.raw.get("embedder") == cfg.raw.get("embedder")), None)
        jobs.append(Job(cfg, index_dir, settings, registry, embedder=shared).open(create=False))
    texts = [t for name in args.queries.split(",") for t in load_query_set(args.dataset, name).queries.values()]
    for job in jobs:  # warm: indexes loaded, model loaded, first-query costs paid
        job.search(Query(text=texts[0], k=args.k))

    per_round: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    for _ in range(args.rounds):
        total: dict[str, list[float]] = {label: [] for label in labels}
        rest: dict[str, list[float]] = {label: [] for label in labels}
        for text in texts:
            for label, job in zip(labels, jobs, strict=True):
                if job.embedder is not None:
                    job.embedder.__dict__.pop("_recent", None)  # embed every query afresh
                t0 = time.perf_counter()
                _, stages = job.search(Query(text=text, k=args.k))
                total[label].append(1000 * (time.perf_counter() - t0))
                rest[label].append(1000 * (time.perf_counter() - t0 - stages.get("embed", 0.0)))
        for label in labels:
            row = {}
            for name, ms in (("", total[label]), ("rest_", rest[label])):
                row.update({f"{name}p50": percentile(ms, 0.5), f"{name}p95": percentile(ms, 0.95)})
                row[f"{name}mean"] = sum(ms) / len(ms)
            per_round[label].append(row)

    metrics = list(per_round[labels[0]][0])
    summary = {
        label: {m: statistics.median(r[m] for r in rounds) for m in metrics} for label, rounds in per_round.items()
    }
    base, base_rest = summary[labels[0]]["p95"], summary[labels[0]]["rest_p95"]
    print(f"{len(texts)} queries x {args.rounds} rounds, k={args.k}, interleaved; ms, median over rounds")
    print("total = the whole search; rest = total minus the query embedding (the same model for all)")
    head = ["p50", "p95", "mean", "p95/first", "rest p50", "rest p95", "rest p95/first"]
    print(f"{'config':28}" + "".join(f"{h:>15}" for h in head))
    for label in labels:
        x = summary[label]
        cells = [x["p50"], x["p95"], x["mean"], x["p95"] / base]
        cells += [x["rest_p50"], x["rest_p95"], x["rest_p95"] / base_rest]
        print(f"{label:28}" + "".join(f"{c:15.2f}" for c in cells))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rounds": per_round, "queries": len(texts)}, indent=1))
    for job in jobs:
        job.close()


if __name__ == "__main__":
    main()
