"""A hybrid answer and a write, timed through HTTP at a given corpus size (issue 35).

As an app or an agent's memory uses plm: `plm serve` (no watcher) over an index of N
generated Markdown files (bench_fresh.py's corpus), then:
  1. Warm queries, one keep-alive client: client latency p50/p95, and where the server's
     milliseconds go (the response's `timings_ms`: embed, each retriever, fusion...).
  2. Throughput with C client processes for S seconds.
  3. W writes: `POST /documents` of one new document holding a word found nowhere, then
     `GET /query` of that word every 5 ms until it is a top-5 hit: seconds from the POST's
     start. A reader thread queries all the while: its slowest answer during the writes
     shows whether readers wait for a write.

Recipes: `bm25` (bm25s, stemmed, Lucene) and `hybrid`: configs/recommended.toml with faiss
HNSW in place of exact dense (BM25 + faiss, RRF k 10, one chunk per document), the query
and every written document embedded by ONNX all-MiniLM-L6-v2 (the packaged model).
`--toy-vectors`: the N indexed documents are embedded by examples/plm-example-plugin's
`hashed_words` (384 dimensions, microseconds a vector), then the store's vectors are
labelled as MiniLM's, so the index has a real 384-dim index's size and cost while MiniLM
embeds the queries and the written documents (embedding a million files with MiniLM on a
small CPU takes many hours). The answers' quality means nothing then; their cost does.

    HF_HUB_OFFLINE=1 python bench/bench_write.py --docs 100000 --recipe hybrid --toy-vectors \\
        --corpus-dir /tmp/plm-fresh-100000 --work /tmp/plm-write-100000 --json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fresh import VOCAB, generate, spread, wait_until  # noqa: E402

URL = re.compile(r"http://127\.0\.0\.1:\d+")
MINILM = '[embedder]\nuse = "sentence_transformers"\nmodel = "all-MiniLM-L6-v2"\nbackend = "onnx"\n'
TOY = '[embedder]\nuse = "hashed_words"\ndim = 384\n'
COMMON = """
[store]
use = "sqlite"

[index.load]
use = "markdown_dir"

[index.chunk]
use = "markdown_semantic"

[query.expand]
use = "none"
{embed}
[query.retrieve]
use = "hybrid"
{dense}
[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "bm25s_stem"
method = "lucene"

[query.retrieve.fuser]
use = "rrf"
order = {order}
default = {{ k = 10, candidates_factor = 10 }}

[query.collapse]
use = "collapse"
per_doc = 1
"""


def config_text(recipe: str, embedder: str) -> str:
    dense = recipe == "hybrid"
    return (f'[job]\nname = "bench_write_{recipe}"\n\n' + (embedder if dense else "")) + COMMON.format(
        embed='\n[query.embed]\nuse = "embed_query"\n' if dense else "",
        dense='\n[query.retrieve.retrievers.dense]\nuse = "faiss"\nindex = "hnsw"\n' if dense else "",
        order=json.dumps(["dense", "bm25"] if dense else ["bm25"]),
    )


def relabel(index: Path) -> None:
    """The toy vectors labelled as MiniLM's: in the store, and in the dense indexes' saved
    versions (which record their vectors' model; a mismatch rebuilds the index)."""
    with sqlite3.connect(index / "plm.sqlite") as db:
        db.execute("UPDATE vectors SET model = 'all-MiniLM-L6-v2'")
        db.execute("UPDATE meta SET value = 'all-MiniLM-L6-v2' WHERE key = 'model'")
    for path in index.glob("*/manifests/*.json"):
        manifest = json.loads(path.read_text())
        if manifest.get("extra", {}).get("model"):
            manifest["extra"]["model"] = "all-MiniLM-L6-v2"
            path.write_text(json.dumps(manifest, indent=1))


def query_text(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCAB, k=rng.randrange(2, 4)))


def client(url: str, seconds: float, seed: int, out: Any) -> None:
    """One client process: queries back to back for `seconds`; puts its latencies (ms)."""
    rng, lat = random.Random(seed), []
    with httpx.Client(base_url=url, timeout=60) as http:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            http.get("/query", params={"q": query_text(rng), "k": 10}).raise_for_status()
            lat.append((time.perf_counter() - t0) * 1000)
    out.put(lat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--recipe", choices=["bm25", "hybrid"], default="bm25")
    ap.add_argument("--toy-vectors", action="store_true", help="hybrid: the N documents' vectors from hashed_words")
    ap.add_argument("--queries", type=int, default=200, help="warm queries, one client")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20, help="the many-client run's length")
    ap.add_argument("--writes", type=int, default=30)
    ap.add_argument("--corpus-dir", type=Path, required=True, help="generated corpus (kept for the next run)")
    ap.add_argument("--work", type=Path, required=True, help="index and configs (an index there is reused)")
    ap.add_argument("--readers", type=int, default=1, help="plm serve --readers: queries answered at once")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--serve-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override the served recipe (plm serve --set; repeat), e.g. a fuser's candidates_factor",
    )
    args = ap.parse_args()
    say = (lambda *_: None) if args.json else (lambda msg: print(msg, file=sys.stderr, flush=True))
    work, corpus = args.work.resolve(), args.corpus_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    generate(corpus, args.docs, 0)
    # PYTHONSAFEPATH: `-m` puts the current folder ahead of PYTHONPATH, so a "before" run
    # (PYTHONPATH=<worktree>) started in the checkout would serve the checkout's code.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0", "PLM_DATA_DIR": str(work / "data")}
    env["PYTHONSAFEPATH"] = "1"
    env.pop("PLM_API_KEY", None)
    plm = [sys.executable, "-m", "plm_index.cli"]
    serve_cfg, index = work / "serve.toml", work / "index"
    serve_cfg.write_text(config_text(args.recipe, MINILM), encoding="utf-8")
    result: dict[str, Any] = {
        "docs": args.docs,
        "recipe": args.recipe,
        "toy_vectors": args.toy_vectors,
        "readers": args.readers,
        "serve_set": args.serve_set,
    }
    if not (index / "plm.sqlite").exists():
        build_cfg = work / "build.toml"
        build_cfg.write_text(config_text(args.recipe, TOY if args.toy_vectors else MINILM), encoding="utf-8")
        say(f"plm ingest {corpus} ({args.docs} files)")
        t0 = time.perf_counter()
        cmd = [*plm, "ingest", str(corpus), "--config", str(build_cfg), "--index", str(index)]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        result["ingest_s"] = round(time.perf_counter() - t0, 1)
        if args.toy_vectors and args.recipe == "hybrid":
            relabel(index)

    log = work / "serve.log"
    cmd = [
        *plm,
        "serve",
        "--config",
        str(serve_cfg),
        "--index",
        str(index),
        "--port",
        "0",
        "--readers",
        str(args.readers),
        *(x for kv in args.serve_set for x in ("--set", kv)),
    ]
    t0 = time.perf_counter()
    server = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: URL.search(log.read_text()) or server.poll() is not None, 3600, "address in its log")
        if not (m := URL.search(log.read_text())):
            sys.exit(f"plm serve exited {server.poll()}:\n{log.read_text()}")
        url = m[0]
        with httpx.Client(base_url=url, timeout=600) as http:
            wait_until(lambda: http.get("/ready").status_code == 200, 3600, "GET /ready 200")
            result["ready_s"] = round(time.perf_counter() - t0, 1)
            rng = random.Random(1)
            for _ in range(20):  # warm: first queries load builds and the query model
                http.get("/query", params={"q": query_text(rng), "k": 10}).raise_for_status()
            say("warm; one client")
            lat, stages = [], {}
            for _ in range(args.queries):
                t0 = time.perf_counter()
                r = http.get("/query", params={"q": query_text(rng), "k": 10})
                lat.append((time.perf_counter() - t0) * 1000)
                for stage, ms in r.raise_for_status().json()["timings_ms"].items():
                    stages.setdefault(stage, []).append(ms)
            result["query_ms"] = spread(lat, 2)
            result["server_ms_median"] = {k: round(statistics.median(v), 2) for k, v in stages.items()}

            say(f"{args.clients} clients for {args.seconds} s")
            out: Any = mp.Queue()
            procs = [mp.Process(target=client, args=(url, args.seconds, i, out)) for i in range(args.clients)]
            for p in procs:
                p.start()
            many = [x for _ in procs for x in out.get()]
            for p in procs:
                p.join()
            result["clients"] = {"n": args.clients, "qps": round(len(many) / args.seconds, 1), **spread(many, 2)}

            say(f"{args.writes} writes")
            stop, reader = threading.Event(), []

            def read() -> None:
                with httpx.Client(base_url=url, timeout=60) as h:
                    r2 = random.Random(2)
                    while not stop.is_set():
                        t1 = time.perf_counter()
                        h.get("/query", params={"q": query_text(r2), "k": 10}).raise_for_status()
                        reader.append((time.perf_counter() - t1) * 1000)

            thread = threading.Thread(target=read, daemon=True)
            thread.start()
            run, searchable, post_ms = os.urandom(3).hex(), [], []
            for i in range(args.writes):
                word = f"fresh{run}w{i}"
                doc = {"id": f"written/{run}-{i}", "text": f"# Note {i}\n\n{query_text(rng)} {word} {query_text(rng)}."}
                t0 = time.perf_counter()
                http.post("/documents", json={"records": [doc]}).raise_for_status()
                post_ms.append((time.perf_counter() - t0) * 1000)

                def found(word: str = word, doc_id: str = doc["id"]) -> bool:
                    hits = http.get("/query", params={"q": word, "k": 5}).json()["hits"]
                    return any(h["doc_id"] == doc_id for h in hits)

                while not found():  # every 5 ms (bench_fresh's wait_until polls every 20)
                    if time.perf_counter() - t0 > 60:
                        raise TimeoutError(f"{word} not searchable after 60 s")
                    time.sleep(0.005)
                searchable.append((time.perf_counter() - t0) * 1000)
            stop.set()
            thread.join()
            result["write_searchable_ms"] = spread(searchable, 1)
            result["post_ms"] = spread(post_ms, 1)
            result["reader_during_writes_ms"] = {"n": len(reader), **spread(reader, 2)}
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
