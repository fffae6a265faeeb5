"""Whole-process start-up times of the shipped recommended recipe against its targets:
`plm --version` <= 0.5 s, a cold hybrid `plm query` with configs/recommended.toml (as
shipped: `backend = "onnx"`) over an existing index <= 1.5 s, and `plm serve` ready (its
`/ready` answering true) <= 2 s. Median of --runs fresh processes, the three interleaved.

    HF_HUB_OFFLINE=1 python bench/bench_startup.py --runs 7 [--json bench/results/startup.json]

The index is built first from the sample corpus (40 documents) into a temporary
PLM_DATA_DIR by `plm ingest`, which also exports MiniLM to ONNX once (that run imports
torch; nothing timed here should). Each cold query also reports whether its process
imported torch (`python -X importtime`, in one extra run outside the timings).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cold import DOCS, QUERY, REPO, cold_serve  # noqa: E402

CONFIG = REPO / "configs" / "recommended.toml"
TARGETS_S = {"plm --version": 0.5, "cold hybrid plm query": 1.5, "plm serve ready": 2.0}


def plm_command() -> list[str]:
    """The `plm` console script beside this Python (what a user runs), else `python -m`."""
    script = Path(sys.executable).parent / "plm"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "plm_index.cli"]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr
    return elapsed


def imports_torch(env: dict[str, str]) -> bool:
    cmd = [sys.executable, "-X", "importtime", "-m", "plm_index.cli", "query", QUERY, "-c", str(CONFIG), "-k", "5"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return any(line.rstrip().endswith("| torch") for line in res.stderr.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cli = plm_command()
    result: dict[str, object] = {"load_average_at_start": os.getloadavg(), "command": cli}
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(Path(folder) / "data"), "PLM_PROGRESS": "0"}
        subprocess.run([*cli, "ingest", str(DOCS), "-c", str(CONFIG)], env=env, check=True, capture_output=True)
        runs: dict[str, list[float]] = {name: [] for name in TARGETS_S}
        for _ in range(args.runs):
            runs["plm --version"].append(timed([*cli, "--version"], env))
            runs["cold hybrid plm query"].append(timed([*cli, "query", QUERY, "-c", str(CONFIG), "-k", "5"], env))
            runs["plm serve ready"].append(cold_serve(cli, CONFIG, env)["ready"])
        result["cold query imports torch"] = imports_torch(env)
    result["load_average_at_end"] = os.getloadavg()
    for name, times in runs.items():
        median, target = statistics.median(times), TARGETS_S[name]
        result[name] = {"median_s": round(median, 3), "runs_s": [round(t, 3) for t in times], "target_s": target}
        print(f"{name:>22}: median {median:.2f} s (target <= {target} s: {'met' if median <= target else 'NOT met'})")
    print(f"cold query imports torch: {result['cold query imports torch']}")
    start, end = result["load_average_at_start"], result["load_average_at_end"]
    print(f"load average at the start {start[0]:.2f}, at the end {end[0]:.2f}")  # type: ignore[index]
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
