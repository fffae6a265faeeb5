"""Query latency only, on indexes `bench/bench_scale.py` left in its work folder: raw bm25s and
plm (and, with --before, plm from another checkout, e.g. main), each in a fresh process with
bench_scale's own query script, taking turns, several rounds; medians of each side's p50/p95.

Usage: python bench/bench_scale_queries.py --work /tmp/plm-scale --size 1000000 --rounds 3
       [--before /path/to/other/checkout] [--out result.json]
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
from bench_scale import PLM_QUERY, RAW_QUERY, make_corpus, pct  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run(code: str, args: list[str], pythonpath: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/plm-scale"))
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=Path, help="another checkout's root, timed as 'plm before'")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import numpy as np

    folder = args.work / str(args.size)
    vocab = make_corpus(args.size, folder / "corpus.jsonl")  # the cached corpus: only its vocabulary
    rng = np.random.default_rng(11)  # bench_scale's queries for its first size
    queries = json.dumps([" ".join(rng.choice(vocab[:5000], size=rng.integers(2, 6))) for _ in range(201)])
    sides = {
        "raw": (RAW_QUERY, [str(folder / "raw_bm25s"), queries], ROOT),
        "plm": (PLM_QUERY, [str(folder / "plm_index"), str(folder / "scale.toml"), queries], ROOT),
    }
    if args.before:
        sides["plm before"] = (PLM_QUERY, [str(folder / "plm_index"), str(folder / "scale.toml"), queries], args.before)
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for i in range(args.rounds):
        for name in list(sides)[:: 1 if i % 2 == 0 else -1]:
            code, argv, path = sides[name]
            lat = run(code, argv, path)["lat"]
            rounds[name].append({"p50": pct(lat, 0.5), "p95": pct(lat, 0.95)})
            print(
                f"round {i} {name:<10} p50 {rounds[name][-1]['p50']:.2f} ms  p95 {rounds[name][-1]['p95']:.2f} ms",
                flush=True,
            )
    summary = {name: {q: statistics.median(r[q] for r in rs) for q in ("p50", "p95")} for name, rs in rounds.items()}
    for name, s in summary.items():
        print(f"median {name:<10} p50 {s['p50']:.2f} ms  p95 {s['p95']:.2f} ms")
    if args.out:
        args.out.write_text(json.dumps({"size": args.size, "rounds": rounds, "median": summary}, indent=1))


if __name__ == "__main__":
    main()
