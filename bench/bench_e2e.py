"""End to end on poc_needle with configs/poc_parity.toml: ingest stages, memory, disk,
warm query latency (split into query embedding and the rest) and cold start.

There is no peer process here: the comparison is the per-stage split within one run, and
the POC's own ingest timings (poc_needle/reference/README.md) printed beside ours as a
ratio. Everything runs in the same process as the timings it reports, except cold start,
which is by definition a NEW subprocess that opens the persisted index and answers one query.

  --index DIR       reuse an existing index (queries only; Job.search never writes to it)
  --ingest          do the full timed ingest first (about 12 minutes on 2 cores)
  --report FILE     a `plm run` JSON report whose ingest timings are quoted instead
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from plm_core.settings import Settings  # noqa: E402
from plm_eval.dataset import load_query_set, resolve_corpus  # noqa: E402
from plm_index.job import Job  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# The POC's own ingest on this corpus and machine (reference/README.md), seconds.
POC_TIMINGS = {"enrichment (keywords+entities+enrich)": 584.0, "spaCy entities": 504.0, "embedding": 244.0}
COLD = """
import json, time, sys
t0 = time.perf_counter()
def hwm_mb():  # not ru_maxrss: Linux carries it over from the forking parent across exec
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
    return int(line.split()[1]) / 1024
from plm_index.job import Job
from plm_core.settings import Settings
t1 = time.perf_counter()
job = Job.from_config(sys.argv[1], index_dir=sys.argv[2], settings=Settings(progress=False, cache=False))
job.open()
t2 = time.perf_counter()
if job.embedder is not None:
    job.embedder.ensure_warm()
t3 = time.perf_counter()
ranking, timings = job.search(sys.argv[3], k=5)
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "model_load_s": t3 - t2, "first_query_s": t4 - t3,
                  "hits": len(ranking.hits), "stage_s": timings,
                  "peak_rss_mb": hwm_mb()}))
"""


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def stage_table(timings: dict[str, float]) -> None:
    total = sum(timings.values())
    for name, s in timings.items():
        print(f"  {name:<22} {s:9.1f} s  {100 * s / total:5.1f} %")
    print(f"  {'sum of stages':<22} {total:9.1f} s")


def poc_ratios(timings: dict[str, float]) -> None:
    ours = {
        "enrichment (keywords+entities+enrich)": sum(timings.get(k, 0.0) for k in ("keywords", "entities", "enrich")),
        "spaCy entities": timings.get("entities", 0.0),
        "embedding": timings.get("embed", 0.0),
    }
    print("vs the POC's own timings (reference/README.md):")
    for name, poc in POC_TIMINGS.items():
        print(f"  {name:<38} plm {ours[name]:7.1f} s  POC {poc:6.1f} s  plm/POC x{ours[name] / poc:.2f}")


def latency(job: Job, texts: list[str], k: int) -> dict[str, Any]:
    job.search(texts[0], k=k)  # warm: model, BM25 mmap, vector matrix
    total, embed = [], []
    for text in texts:
        t0 = time.perf_counter()
        _, timings = job.search(text, k=k)
        total.append(time.perf_counter() - t0)
        embed.append(sum(v for key, v in timings.items() if "embed" in key))
    t, e = np.array(total) * 1000, np.array(embed) * 1000
    rest = t - e

    def pct(a: Any) -> dict[str, float]:
        return {f"p{p}": float(np.percentile(a, p)) for p in (50, 95, 99)} | {"mean": float(a.mean())}

    parts = {"total_ms": pct(t), "embed_ms": pct(e), "rest_ms": pct(rest)}
    return {"n": len(texts), **parts, "stage_keys": sorted(timings)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=ROOT / "configs/poc_parity.toml")
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared/datasets/poc_needle")
    ap.add_argument("--index", type=Path, default=ROOT / ".plm/poc_parity-poc_needle")
    ap.add_argument("--ingest", action="store_true", help="run the full timed ingest into --index first")
    ap.add_argument("--report", type=Path, help="quote ingest timings from this `plm run` JSON report")
    ap.add_argument("--queries", default="needle,informed,realistic50")
    ap.add_argument("--cycles", type=int, default=2, help="passes over all queries (120 x 2 = 240)")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--cold-reps", type=int, default=2, help="cold-start subprocesses (median reported)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    job = Job.from_config(args.config, index_dir=args.index, settings=Settings(progress=False, cache=not args.ingest))

    if args.ingest:
        t0 = time.perf_counter()
        report = job.ingest([resolve_corpus(job.config, args.dataset)], force=True)
        out["ingest"] = {
            **report.as_dict(),
            "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    elif args.report:
        out["ingest"] = json.loads(args.report.read_text())["ingest"] | {"from_report": str(args.report)}
    if "ingest" in out:
        ing = out["ingest"]
        print(f"ingest: {ing['documents']} docs -> {ing['chunks']} chunks, wall {ing['wall_s']:.1f} s")
        stage_table(ing["timings_s"])
        poc_ratios(ing["timings_s"])
        if "peak_rss_mb" in ing:
            print(f"  peak RSS during ingest: {ing['peak_rss_mb']:.0f} MB")

    out["index_bytes"] = dir_size(args.index)
    print(f"index on disk: {out['index_bytes'] / 1e6:.1f} MB ({args.index})")

    texts = [t for name in args.queries.split(",") for t in load_query_set(args.dataset, name).queries.values()]
    lat = latency(job, texts * args.cycles, args.k)
    out["latency"] = lat
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"warm query latency, k={args.k}, {lat['n']} queries (stages: {', '.join(lat['stage_keys'])}):")
    for part in ("total_ms", "embed_ms", "rest_ms"):
        v = lat[part]
        print(f"  {part:<9} p50 {v['p50']:7.1f}  p95 {v['p95']:7.1f}  p99 {v['p99']:7.1f}  mean {v['mean']:7.1f} ms")
    print(f"  embedding share of mean latency: {lat['embed_ms']['mean'] / lat['total_ms']['mean']:.0%}")
    print(f"peak RSS of this process (ingest if run + queries): {out['peak_rss_mb']:.0f} MB")
    job.close()

    colds = []
    for _ in range(args.cold_reps):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", COLD, str(args.config), str(args.index), texts[0]],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - t0
        colds.append(json.loads(proc.stdout.strip().splitlines()[-1]) | {"wall_s": wall})
    cold = sorted(colds, key=lambda c: c["wall_s"])[len(colds) // 2]
    out["cold_start"] = {"runs": colds, "median": cold}
    print(f"cold start (new process, open index, first answer), median of {len(colds)}: {cold['wall_s']:.2f} s wall")
    for key in ("import_s", "open_s", "model_load_s", "first_query_s"):
        print(f"  {key:<14} {cold[key]:6.2f} s  {100 * cold[key] / cold['wall_s']:5.1f} %")
    other = cold["wall_s"] - sum(cold[k] for k in ("import_s", "open_s", "model_load_s", "first_query_s"))
    print(f"  {'interpreter':<14} {other:6.2f} s  {100 * other / cold['wall_s']:5.1f} %  (startup, exit)")
    print(f"  child peak RSS {cold['peak_rss_mb']:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
