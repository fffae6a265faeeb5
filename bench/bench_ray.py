"""Ray executor vs local on one machine: `plm ingest` of the same corpus with the same config,
content cache off (every chunk embedded), each run a fresh process and a fresh index.

Usage: python bench/bench_ray.py --corpus ../shared/datasets/scifact/corpus.jsonl \
           --config configs/scifact/recommended.toml [--rounds 1] [--workers 2]
The Ray runs start a local Ray for the command (as `plm ingest --executor ray` does),
so Ray's start-up is part of its wall time, as a user sees it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def ingest(corpus: Path, config: Path, executor: str, workers: int, work: Path) -> dict:
    index = work / f"index-{executor}"
    shutil.rmtree(index, ignore_errors=True)
    cmd = [sys.executable, "-m", "plm_index.cli", "ingest", str(corpus), "--config", str(config)]
    cmd += ["--index", str(index), "--json", "--executor", executor]
    if executor == "ray":
        cmd += ["--set", f"executor.workers={workers}"]
    env = {**os.environ, "PLM_CACHE": "0", "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(work)}
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    report = json.loads(res.stdout)
    return {"wall_s": wall, "chunks": report["chunks"], "timings": report["timings_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"local": [], "ray": []}
    with tempfile.TemporaryDirectory(prefix="plm-bench-ray-") as tmp:
        for _ in range(args.rounds):
            for executor in ("local", "ray"):  # interleaved, so drift hits both
                run = ingest(args.corpus, args.config, executor, args.workers, Path(tmp))
                runs[executor].append(run)
                print(executor, json.dumps(run), flush=True)
    local = statistics.median(r["wall_s"] for r in runs["local"])
    ray = statistics.median(r["wall_s"] for r in runs["ray"])
    assert runs["local"][0]["chunks"] == runs["ray"][0]["chunks"]
    print(json.dumps({"local_s": local, "ray_s": ray, "ray_over_local": ray / local, "workers": args.workers}))


if __name__ == "__main__":
    main()
