"""Cold `plm query` and cold `plm serve`: whole-process wall times in fresh processes, for a
BM25-only recipe, the recommended hybrid recipe (torch) and the same with `backend = "onnx"`
(whose queries need no torch once the model is exported). Builds its indexes from the sample
corpus in a temporary folder first; reports the median of --runs runs, the configs interleaved.

    HF_HUB_OFFLINE=1 python bench/bench_cold.py --runs 7 [--json bench/results/cold.json]
    HF_HUB_OFFLINE=1 python bench/bench_cold.py --serve --runs 7 [--json bench/results/cold_serve.json]

With --serve, each run launches `plm serve` and times, from the launch: its "ready on" line,
the first `GET /ready` that answers 200 with `"ready": true` (polled every 20 ms), and the
first `GET /query` answered after that (what a client started with the server waits for);
then the server is stopped with SIGTERM and the next one started.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "examples" / "sample_corpus" / "docs"


def configs(tmp: Path) -> dict[str, Path]:
    recommended = (REPO / "configs" / "recommended.toml").read_text()
    sample = f'dataset = "{REPO}/examples/sample_corpus"'
    recommended = recommended.replace('dataset = "../examples/sample_corpus"', sample)
    bm25 = (REPO / "configs" / "experiments" / "bm25_stemmed.toml").read_text()
    bm25 = bm25.replace('dataset = "../../examples/sample_corpus"', sample)
    # configs/recommended.toml ships with backend = "onnx"; the torch side is its one-line change
    torch = recommended.replace('name = "recommended"', 'name = "recommended_torch"').replace(
        'backend = "onnx"', 'backend = "torch"', 1
    )
    out = {"bm25 only": bm25, "hybrid, torch": torch, "hybrid, onnx": recommended}
    paths = {}
    for name, text in out.items():
        path = tmp / (name.replace(" ", "").replace(",", "_") + ".toml")
        path.write_text(text)
        paths[name] = path
    return paths


QUERY = "how do I rotate api keys"


def cold_query(cli: list[str], path: Path, env: dict[str, str]) -> dict[str, float]:
    t0 = time.perf_counter()
    res = subprocess.run([*cli, "query", QUERY, "-c", str(path), "-k", "5"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return {"query": time.perf_counter() - t0}


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - a local server
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


def cold_serve(cli: list[str], path: Path, env: dict[str, str]) -> dict[str, float]:
    """Seconds from launching `plm serve` to its ready line, to `/ready` answering true, and to
    the first query answered."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    marks: dict[str, float] = {}
    t0 = time.perf_counter()
    server = subprocess.Popen(
        [*cli, "serve", "-c", str(path), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line)
            if "ready on" in line and "line" not in marks:
                marks["line"] = time.perf_counter() - t0

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.perf_counter() + 120
        while True:
            status, body = _get(f"{url}/ready")
            if status == 200 and json.loads(body).get("ready") is True:
                marks["ready"] = time.perf_counter() - t0
                break
            if server.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"plm serve never got ready: {''.join(lines)}")
            time.sleep(0.02)
        status, body = _get(f"{url}/query?q={QUERY.replace(' ', '+')}&k=5")
        assert status == 200 and json.loads(body)["hits"], body
        marks["first query"] = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(timeout=60)
        reader.join(timeout=10)
    assert "line" in marks, "".join(lines)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--serve", action="store_true", help="Time `plm serve` to ready, not `plm query`.")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    measure = cold_serve if args.serve else cold_query
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(tmp / "data"), "PLM_PROGRESS": "0"}
        cli = [sys.executable, "-m", "plm_index.cli"]
        paths = configs(tmp)
        for path in paths.values():  # build the indexes (and the ONNX export) once
            subprocess.run([*cli, "ingest", str(DOCS), "-c", str(path)], env=env, check=True, capture_output=True)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
        for _ in range(args.runs):
            for name, path in paths.items():
                runs[name].append(measure(cli, path, env))
    # A mark's keys: "median_s"/"runs_s" for a query (as before), "<mark>_median_s"/... for serve.
    medians: dict[str, dict[str, float]] = {}
    result: dict[str, object] = {"load_average_at_end": os.getloadavg()}
    for name, marks in runs.items():
        row: dict[str, object] = {}
        for mark in marks[0]:
            ts = [m[mark] for m in marks]
            key = "" if mark == "query" else mark.replace(" ", "_") + "_"
            medians.setdefault(name, {})[mark] = row[f"{key}median_s"] = statistics.median(ts)
            row[f"{key}runs_s"] = [round(t, 3) for t in ts]
        result[name] = row
    base = medians["bm25 only"]
    for name, by_mark in medians.items():
        shown = [f"{mark} median {m:.2f} s ({m / base[mark]:.2f}x bm25 only)" for mark, m in by_mark.items()]
        print(f"{name:>14}: " + ", ".join(shown))
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
