"""Load test of `plm serve` (loopback only, bounded): N client processes query for a fixed
time while another process syncs the same index several times.

Checks, on every response: no error, and every hit is a chunk of one whole version of its
document (the chunk texts of each version are computed with the config's own chunker).
Reports throughput and p50/p95/p99 latency per client count.

    HF_HUB_OFFLINE=1 python bench/bench_serve_load.py --clients 1,8 --seconds 60 --syncs 3 \\
        --json bench/results/serve_load.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "experiments" / "rrf_no_enrichment.toml"
N_DOCS = 40
TOPICS = ["backup", "network", "storage", "billing", "security", "scaling", "logging", "upgrade"]


def doc_text(i: int, version: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    sections = []
    for s in range(2 + (i + version) % 3):
        words = " ".join(f"{topic}{(i * 7 + s * 3 + w) % 50} term{w}" for w in range(30 + 10 * (version % 2)))
        sections.append(f"## Part {s}\n\nVersion v{version} of doc{i:02d} part {s}. {words}.\n")
    return f"---\ntitle: Doc {i}\nteam: {topic}\n---\n\n# Doc {i}\n\n" + "\n".join(sections)


def write_corpus(folder: Path, version: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(N_DOCS):
        (folder / f"doc{i:02d}.md").write_text(doc_text(i, version))


def expected_chunks(versions: range) -> dict[str, dict[int, set[str]]]:
    """doc id -> version -> the chunk texts of that version of the document."""
    from plm_core.records import Document
    from plm_core.settings import Settings
    from plm_index.job import Job

    job = Job.from_config(CONFIG, index_dir=Path(tempfile.mkdtemp()), settings=Settings(cache=False))
    chunker = job.transform.stages[0]
    out: dict[str, dict[int, set[str]]] = {}
    for v in versions:
        for chunk in chunker.run([Document(id=f"doc{i:02d}", text=doc_text(i, v)) for i in range(N_DOCS)]):
            out.setdefault(chunk.doc_id, {}).setdefault(v, set()).add(chunk.text)
    return out


def torn_documents(hits: list[list[Any]], expect: dict[str, dict[int, set[str]]]) -> list[str]:
    """Documents of one response whose hits are not all chunks of one same version."""
    texts: dict[str, set[str]] = {}
    for doc, text, _ in hits:
        texts.setdefault(doc, set()).add(text)
    return [d for d, t in texts.items() if not any(t <= chunks for chunks in expect.get(d, {}).values())]


def client(url: str, seconds: float, seed: int, out: str) -> None:
    import httpx

    rng = random.Random(seed)
    rows = []
    with httpx.Client(base_url=url, timeout=30) as http:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            i = rng.randrange(N_DOCS)
            body: dict[str, Any] = {"text": f"doc{i:02d} part 1 {TOPICS[i % 8]}{i % 50} term5", "k": 5}
            if rng.random() < 0.3:
                body["filters"] = {"team": TOPICS[rng.randrange(8)]}
            t0 = time.perf_counter()
            try:
                r = http.post("/query", json=body)
                ms = 1000 * (time.perf_counter() - t0)
                ok = r.status_code == 200
                data = r.json()
                hits = [[h["doc_id"], h["text"], h["metadata"].get("team")] for h in data.get("hits", [])] if ok else []
                rows.append(
                    {
                        "ms": ms,
                        "status": r.status_code,
                        "hits": hits,
                        "filters": body.get("filters"),
                        "version": data.get("corpus_version"),
                        "error": None if ok else data.get("error"),
                    }
                )
            except Exception as err:  # noqa: BLE001 - counted as an error
                rows.append({"ms": 1000 * (time.perf_counter() - t0), "status": 0, "hits": [], "error": repr(err)})
    Path(out).write_text(json.dumps(rows))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(clients: int, seconds: float, syncs: int, root: Path, env: dict[str, str], readers: int) -> dict[str, Any]:
    import httpx

    corpus, index = root / "corpus", root / f"index-{clients}"
    plm = [sys.executable, "-m", "plm_index.cli"]
    ingest = [*plm, "ingest", str(corpus), "--config", str(CONFIG), "--index", str(index)]
    # Every version once into a scratch index first: the syncs under load then take their
    # vectors from the content cache, so several land within the run (the server is measured).
    for version in range(syncs, -1, -1):
        write_corpus(corpus, version)
        warm = [*plm, "ingest", str(corpus), "--config", str(CONFIG), "--index", str(root / "warm")]
        subprocess.run(warm, env=env, check=True, capture_output=True)
    subprocess.run(ingest, env=env, check=True, capture_output=True)
    port = free_port()
    log = (root / f"serve-{clients}.log").open("w")
    serve_cmd = [*plm, "serve", "--config", str(CONFIG), "--index", str(index), "--port", str(port)]
    server = subprocess.Popen([*serve_cmd, "--readers", str(readers)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/ready", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    outs = [str(root / f"client-{clients}-{n}.json") for n in range(clients)]
    procs = [mp.Process(target=client, args=(url, seconds, n, outs[n])) for n in range(clients)]
    for p in procs:
        p.start()
    sync_times, start = [], time.monotonic()
    for version in range(1, syncs + 1):  # spread over the run
        time.sleep(max(0.0, start + version * seconds / (syncs + 1) - time.monotonic()))
        write_corpus(corpus, version)
        t0 = time.perf_counter()
        subprocess.run(ingest, env=env, check=True, capture_output=True)
        sync_times.append(round(time.perf_counter() - t0, 2))
    for p in procs:
        p.join()
    server.terminate()
    server.wait(timeout=60)
    rows = [r for out in outs for r in json.loads(Path(out).read_text())]
    return {"clients": clients, "rows": rows, "sync_seconds": sync_times, "seconds": seconds}


def summarise(result: dict[str, Any], expect: dict[str, dict[int, set[str]]]) -> dict[str, Any]:
    rows = result["rows"]
    errors = [r for r in rows if r["status"] != 200]
    torn = [doc for r in rows for doc in torn_documents(r["hits"], expect)]
    wrong_filter = [r for r in rows if r.get("filters") and any(t != r["filters"]["team"] for *_, t in r["hits"])]
    ms = sorted(r["ms"] for r in rows if r["status"] == 200)
    q = statistics.quantiles(ms, n=100) if len(ms) > 1 else [0.0] * 99
    return {
        "clients": result["clients"],
        "queries": len(rows),
        "errors": len(errors),
        "error_examples": [r.get("error") for r in errors[:3]],
        "hits_not_from_a_whole_version": len(torn),
        "hits_breaking_filters": len(wrong_filter),
        "versions_seen": len({r.get("version") for r in rows}),
        "qps": round(len(rows) / result["seconds"], 1),
        "p50_ms": round(q[49], 1),
        "p95_ms": round(q[94], 1),
        "p99_ms": round(q[98], 1),
        "sync_seconds": result["sync_seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="1,8", help="client counts to run, e.g. 1,8")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--syncs", type=int, default=3)
    parser.add_argument("--readers", type=int, default=1, help="plm serve --readers")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="plm-load-"))
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(root / "data")}
    env.pop("PLM_API_KEY", None)
    expect = expected_chunks(range(0, args.syncs + 1))
    summaries = []
    for n in (int(c) for c in args.clients.split(",")):
        summary = summarise(run(n, args.seconds, args.syncs, root, env, args.readers), expect)
        print(json.dumps(summary), flush=True)
        summaries.append(summary)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"config": str(CONFIG.relative_to(REPO)), "readers": args.readers, "cpus": os.cpu_count()}
        args.json.write_text(json.dumps({"meta": meta, "runs": summaries}, indent=1))


if __name__ == "__main__":
    main()
