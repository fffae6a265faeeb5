"""The papers use case at 1,000 papers (configs/papers.toml, dense MiniLM over title +
abstract): index time per 100 papers, warm query p50/p95 through the HTTP service, and the
time a new process takes to open the persisted index without loading the model.

The 1,000 papers are made from the 41 sample papers (examples/papers/papers.json): each
synthetic paper takes a sample's title and a shuffled mix of sentences from three samples'
abstracts, so texts are realistic in length and vocabulary and all different.

    HF_HUB_OFFLINE=1 python bench/bench_papers.py --papers 1000 --json bench/results/papers.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "papers.toml"
SAMPLE = REPO / "examples" / "papers" / "papers.json"

OPEN_WITHOUT_MODEL = """
import sys, time
t0 = time.perf_counter()
from plm_index.job import Job
job = Job.from_config(sys.argv[1], index_dir=sys.argv[2])
job.open(create=False)
with job.store.snapshot():
    job.searcher.warm()
loaded = job.embedder is not None and getattr(job.embedder, "_warm", False)
print(f"{time.perf_counter() - t0:.4f} {len(job.searcher.corpus.chunk_ids)} {loaded}")
"""


def make_papers(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    sample = json.loads(SAMPLE.read_text())
    sentences = [s for p in sample for s in re.split(r"(?<=\.)\s+", p["abstract"]) if s]
    papers = []
    for i in range(n):
        base = sample[i % len(sample)]
        own = re.split(r"(?<=\.)\s+", base["abstract"])
        text = own[:2] + rng.sample(sentences, 4)
        papers.append(
            {
                **base,
                "paper_id": f"syn-{i:05d}",
                "title": f"{base['title']} ({i})",
                "abstract": " ".join(text),
                "year": 2000 + i % 25,
                "bibtex_key": f"syn{i}",
            }
        )
    return papers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--papers", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="plm-papers-"))
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(root / "data")}
    env["PLM_CACHE"] = "0"  # every paper embedded for real: index time is what a new user pays
    papers = make_papers(args.papers)
    source = root / "papers.json"
    source.write_text(json.dumps(papers))
    index = root / "index"
    plm = [sys.executable, "-m", "plm_index.cli"]
    res = subprocess.run(
        [*plm, "ingest", str(source), "--config", str(CONFIG), "--index", str(index), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(res.stdout)
    ingest_s = report["seconds"]
    opens = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", OPEN_WITHOUT_MODEL, str(CONFIG), str(index)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seconds, chunks, model_loaded = out.stdout.split()
        assert model_loaded == "False", "opening the index loaded the model"
        opens.append(float(seconds))
    port = free_port()
    log = (root / "serve.log").open("w")
    server = subprocess.Popen(
        [*plm, "serve", "--config", str(CONFIG), "--index", str(index), "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        rng = random.Random(1)
        queries = [" ".join(rng.choice(papers)["title"].split()[:6]) for _ in range(args.queries)]
        latencies, found = [], 0
        with httpx.Client(base_url=url, timeout=30) as http:
            http.post("/query", json={"text": "warm up", "k": 10})
            for q in queries:
                t0 = time.perf_counter()
                hits = http.post("/query", json={"text": q, "k": 10}).json()["hits"]
                latencies.append(1000 * (time.perf_counter() - t0))
                found += any(0.0 <= h["score"] <= 1.0 and "bibtex_key" in h["metadata"] for h in hits)
    finally:
        server.terminate()
        server.wait(timeout=60)
    q = statistics.quantiles(latencies, n=100)
    result = {
        "papers": args.papers,
        "chunks": int(chunks),
        "ingest_s": round(ingest_s, 2),
        "index_s_per_100_papers": round(100 * ingest_s / args.papers, 2),
        "ingest_timings_s": report.get("timings_s"),
        "open_without_model_s_median": round(statistics.median(opens), 3),
        "open_without_model_s_all": [round(o, 3) for o in opens],
        "http_query_p50_ms": round(q[49], 1),
        "http_query_p95_ms": round(q[94], 1),
        "queries": len(latencies),
        "responses_with_paper_fields_and_unit_scores": found,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
