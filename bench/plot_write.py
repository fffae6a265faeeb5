"""The latency plot of BENCHMARKS.md section 24, beside section 16's freshness plot: through
HTTP, a warm query's p50/p95 and a write's POST-to-searchable p50/p95 against corpus size,
from bench/bench_write.py's JSON results (one file per size and recipe).

    python bench/plot_write.py bench/results/write_*.json --out bench/results/write.png
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

PANELS = (("query_ms", "warm query, one client (ms)"), ("write_searchable_ms", "POST to searchable (ms)"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs: dict[str, list[dict]] = defaultdict(list)
    for path in args.results:
        run = json.loads(path.read_text())
        runs[run["recipe"] + (" (toy vectors)" if run.get("toy_vectors") else "")].append(run)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(11, 4))
    for ax, (key, title) in zip(axes, PANELS, strict=True):
        for label, found in sorted(runs.items()):
            found.sort(key=lambda r: r["docs"])
            sizes = [r["docs"] for r in found]
            for stat, style in (("p50", "o-"), ("p95", "s--")):
                ax.plot(sizes, [r[key][stat] for r in found], style, label=f"{label} {stat}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents (one chunk each)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
