"""The freshness plot of BENCHMARKS.md section 16: save-to-searchable p95 and query p95
against corpus size, from bench/bench_fresh.py's JSON results, beside the whole-rebuild
numbers measured before segments (issue 22: 0.64-0.83 s at 1k, 10.1-15.7 s at 100k).

    python bench/plot_fresh.py bench/results/fresh_*.json --out bench/results/fresh.png
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

BEFORE = {1_000: 0.83, 100_000: 15.7}  # BM25 only, max of the range the issue measured


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fresh: dict[str, list[tuple[int, float]]] = defaultdict(list)
    query: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for path in args.results:
        r = json.loads(path.read_text())
        name = r["params"]["recipe"] + (" (toy embedder)" if r["params"].get("toy_embedder") else "")
        fresh[name].append((r["params"]["docs"], r["save_to_searchable_s"]["p95"]))
        query[name].append((r["params"]["docs"], r["query_ms"]["p95"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(list(BEFORE), list(BEFORE.values()), "k--o", label="bm25, whole rebuild (before)")
    for name, points in sorted(fresh.items()):
        points.sort()
        left.plot([p[0] for p in points], [p[1] for p in points], "-o", label=f"{name}, segments")
    for name, points in sorted(query.items()):
        points.sort()
        right.plot([p[0] for p in points], [p[1] for p in points], "-o", label=name)
    left.set(xscale="log", yscale="log", xlabel="documents", ylabel="save to searchable, p95 (s)")
    right.set(xscale="log", xlabel="documents", ylabel="query p95 through plm serve (ms)")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
