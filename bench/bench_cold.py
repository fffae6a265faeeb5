"""Cold `plm query`: whole-process wall time of one query in a fresh process, for a BM25-only
recipe, the recommended hybrid recipe (torch) and the same with `backend = "onnx"` (whose
queries need no torch once the model is exported). Builds its indexes from the sample corpus
in a temporary folder first; reports the median of --runs runs, the configs interleaved.

    HF_HUB_OFFLINE=1 python bench/bench_cold.py --runs 7 [--json bench/results/cold.json]
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

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "examples" / "sample_corpus" / "docs"


def configs(tmp: Path) -> dict[str, Path]:
    recommended = (REPO / "configs" / "recommended.toml").read_text()
    sample = f'dataset = "{REPO}/examples/sample_corpus"'
    recommended = recommended.replace('dataset = "../examples/sample_corpus"', sample)
    bm25 = (REPO / "configs" / "experiments" / "bm25_stemmed.toml").read_text()
    bm25 = bm25.replace('dataset = "../../examples/sample_corpus"', sample)
    onnx = recommended.replace('name = "recommended"', 'name = "recommended_onnx"').replace(
        "normalize = true", 'normalize = true\nbackend = "onnx"', 1
    )
    out = {"bm25 only": bm25, "hybrid, torch": recommended, "hybrid, onnx": onnx}
    paths = {}
    for name, text in out.items():
        path = tmp / (name.replace(" ", "").replace(",", "_") + ".toml")
        path.write_text(text)
        paths[name] = path
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(tmp / "data"), "PLM_PROGRESS": "0"}
        cli = [sys.executable, "-m", "plm_core.cli"]
        paths = configs(tmp)
        for path in paths.values():  # build the indexes (and the ONNX export) once
            subprocess.run([*cli, "ingest", str(DOCS), "-c", str(path)], env=env, check=True, capture_output=True)
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.runs):
            for name, path in paths.items():
                t0 = time.perf_counter()
                res = subprocess.run(
                    [*cli, "query", "how do I rotate api keys", "-c", str(path), "-k", "5"],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                times[name].append(time.perf_counter() - t0)
                assert res.returncode == 0, res.stderr
    result = {
        name: {"median_s": statistics.median(ts), "runs_s": [round(t, 3) for t in ts]} for name, ts in times.items()
    }
    base = result["bm25 only"]["median_s"]
    for name, row in result.items():
        ratio = row["median_s"] / base
        print(f"{name:>14}: median {row['median_s']:.2f} s ({ratio:.2f}x bm25 only)  runs {row['runs_s']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
