"""`plm watch` latency: from saving a file to finding the change, and a 1,000-file burst.

On a temporary copy of the sample corpus (examples/sample_corpus/docs, 40 pages), with
configs/experiments/rrf_no_enrichment.toml (MiniLM + BM25, no enrichment):
  1. `plm watch DOCS` runs as a process (its catch-up ingest fills the empty index).
  2. 50 times: append a line with a unique word to a random page, then query the word
     and the page's title from this process (a separate Job over the same index, as
     another process would; every 50 ms) until that page is hit 1 and a hit holds the
     word: save-to-searchable, p50 and p95.
  3. Write 1,000 new small pages at once (a branch switch): time until all are stored,
     and how many syncs (batch lines in the watcher's log) it took.
  4. SIGTERM: the watcher must exit 0.

  python bench/bench_watch.py [--edits 50] [--burst 1000] [--debounce-ms 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "experiments" / "rrf_no_enrichment.toml"
CORPUS = ROOT / "examples" / "sample_corpus" / "docs"
BATCH = re.compile(r"batch (\d+): (\d+) changed, (\d+) removed; (.*)")
POLL_S = 0.05


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> float:
    """Seconds until `check()` is true; TimeoutError after `timeout`."""
    t0 = time.perf_counter()
    while not check():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(POLL_S)
    return time.perf_counter() - t0


def found(reader: Any, query: str, word: str, doc_id: str) -> bool:
    """The page is hit 1, and a hit holds the new word (so the edit, not the old text, was found)."""
    hits = reader.retrieve(query, k=5)
    return bool(hits) and hits[0].doc_id == doc_id and any(word in h.text for h in hits)


def batches(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text().splitlines():
        if m := BATCH.search(line):
            found.append({"batch": int(m[1]), "changed": int(m[2]), "removed": int(m[3]), "summary": m[4]})
    return found


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--debounce-ms", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, help="work folder to keep (default: a temp folder, removed)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "watch.json")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()

    os.environ.update(HF_HUB_OFFLINE="1", PLM_PROGRESS="0")
    from plm_core.settings import Settings
    from plm_index.job import Job

    work = args.keep or Path(tempfile.mkdtemp(prefix="plm-bench-watch-"))
    work.mkdir(parents=True, exist_ok=True)
    docs, index, log = work / "docs", work / "index", work / "watch.log"
    shutil.rmtree(docs, ignore_errors=True)
    shutil.rmtree(index, ignore_errors=True)
    shutil.copytree(CORPUS, docs)
    env = {**os.environ, "PLM_DATA_DIR": str(work / "data")}
    cmd = [sys.executable, "-m", "plm_index.cli", "watch", str(docs), "--config", str(args.config)]
    cmd += ["--index", str(index), "--debounce-ms", str(args.debounce_ms)]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with log.open("w") as fh:
        watcher = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        catch_up_s = wait_for(lambda: "catch-up" in log.read_text(), 900, "the catch-up ingest")
        settings = Settings(progress=False, data_dir=str(work / "reader"))
        reader = Job.from_config(args.config, index_dir=index, settings=settings)
        reader.retrieve("warm up", k=1)  # load the model and open the indexes before timing

        rng = random.Random(args.seed)
        pages = sorted(docs.glob("*.md"))
        latencies: list[float] = []
        missed: list[dict[str, Any]] = []
        for i in range(args.edits):
            page = rng.choice(pages)
            word = f"kestrel{i:03d}q{rng.randrange(10**6):06d}"  # in no other page: hits prove the sync
            title = page.stem.replace("-", " ")  # so dense retrieval finds the page too
            with page.open("a", encoding="utf-8") as fh:
                fh.write(f"\n\nWatch probe {word} for {title}\n")
            saved = time.perf_counter()
            try:
                wait_for(partial(found, reader, f"{word} {title}", word, page.stem), 20, word)
                latencies.append(time.perf_counter() - saved)
            except TimeoutError:  # was it synced, and only ranked lower?
                synced = any(word in c.text for c in reader.open().store.chunks() if c.doc_id == page.stem)
                missed.append({"page": page.stem, "query": f"{word} {title}", "edit_stored": synced})
        edit_batches = len(batches(log))
        sync_s = [float(m[1]) for b in batches(log) if (m := re.search(r" in (\d+\.\d+)s", b["summary"]))]

        before = len(reader.open().store.doc_paths())
        t1 = time.perf_counter()
        for i in range(args.burst):
            text = f"# Burst note {i}\n\nBurst note {i} holds the word burst{i:04d} and a few more words.\n"
            (docs / f"burst-{i:04d}.md").write_text(text, encoding="utf-8")
        written_s = time.perf_counter() - t1
        stored_s = wait_for(lambda: len(reader.open().store.doc_paths()) == before + args.burst, 900, "the burst")
        synced_s = stored_s + wait_for(
            lambda: sum(b["changed"] for b in batches(log)[edit_batches:]) >= args.burst, 900, "the last batch"
        )
        burst = batches(log)[edit_batches:]
        last = args.burst - 1
        searchable = found(reader, f"burst{last:04d} burst note {last}", f"burst{last:04d}", f"burst-{last:04d}")

        watcher.send_signal(signal.SIGTERM)
        exit_code = watcher.wait(timeout=120)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    result = {
        "config": str(args.config.relative_to(ROOT) if args.config.is_relative_to(ROOT) else args.config),
        "corpus": f"{CORPUS.relative_to(ROOT)} ({len(pages)} pages, copied)",
        "machine": {"cpus": os.cpu_count(), "load_1min_before": round(load_before, 2)},
        "debounce_ms": args.debounce_ms,
        "start_to_caught_up_s": round(catch_up_s, 2),
        "edits": {
            "n": args.edits,
            "found_as_hit_1": len(latencies),
            "missed": missed,
            "save_to_searchable_p50_s": round(statistics.median(latencies), 3),
            "save_to_searchable_p95_s": round(pct(latencies, 0.95), 3),
            "min_s": round(min(latencies), 3),
            "max_s": round(max(latencies), 3),
            "syncs": edit_batches,
            "sync_s_p50": round(statistics.median(sync_s), 2),  # the watcher's own sync, from its log
            "query_poll_s": POLL_S,
            "note": "missed: not hit 1 within 20 s of saving; edit_stored says whether the watcher had synced it",
        },
        "burst": {
            "files": args.burst,
            "write_s": round(written_s, 2),
            "all_stored_s": round(stored_s, 2),
            "all_synced_s": round(synced_s, 2),
            "batches": len(burst),
            "batch_files": [b["changed"] for b in burst],
            "batch_summaries": [b["summary"] for b in burst],
            "last_file_hit_1": searchable,
        },
        "watcher_exit_code": exit_code,
        "total_s": round(time.perf_counter() - t0, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        e, b = result["edits"], result["burst"]
        print(f"caught up in {result['start_to_caught_up_s']}s; {e['found_as_hit_1']}/{e['n']} edits found as hit 1")
        print(f"save to searchable: p50 {e['save_to_searchable_p50_s']}s, p95 {e['save_to_searchable_p95_s']}s")
        print(f"{b['files']} files: all stored in {b['all_stored_s']}s, {b['batches']} batches {b['batch_files']}")
        print(f"watcher exit code {exit_code}; written to {args.out}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
