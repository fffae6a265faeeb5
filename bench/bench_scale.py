"""Scale: `plm ingest` (BM25 only) against raw bm25s on the same synthetic texts, at several
corpus sizes, in one run. Per size, each side runs in a fresh process:

- ingest wall time and peak RSS (VmHWM) of the whole process;
- cold start: a new process opens the index and answers one query (import time apart);
- warm query latency p50/p95 over 200 queries (k = 10) in that process;
- bytes on disk: plm's index folder vs raw bm25s's saved index plus the texts (corpus.jsonl).

Usage: python bench/bench_scale.py --sizes 10000 100000 1000000 --out bench/results/scale.json
       [--plot bench/results/scale.png] [--work /tmp/plm-scale]
The corpus is deterministic (seeded): Zipf-distributed words from a 50,000-word vocabulary,
40-120 words per document, one chunk per document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """
[job]
name = "scale"
[index.load]
use = "beir_corpus"
[index.chunk]
use = "markdown_semantic"
target_words = 400
min_words = 50
max_words = 800
[query.retrieve]
use = "bm25s"
tokenizer = "bm25s_stem"
method = "lucene"
k1 = 1.5
b = 0.75
dtype = "float32"
"""
HWM = """
def hwm_mb():  # not ru_maxrss: Linux carries it over from the forking parent across exec
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
    return int(line.split()[1]) / 1024
"""
RAW_INGEST = (
    HWM
    + """
import json, sys, time
t0 = time.perf_counter()
import bm25s, Stemmer
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
tokens = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
r = bm25s.BM25(method="lucene", k1=1.5, b=0.75, dtype="float32")
r.index(tokens, show_progress=False)
r.save(sys.argv[2])
print(json.dumps({"wall_s": time.perf_counter() - t0, "peak_rss_mb": hwm_mb()}))
"""
)
PLM_INGEST = (
    HWM
    + """
import json, sys, time, contextlib, io, threading, psutil
workers_mb = [0.0]  # the BM25 build's tokenizing workers, together, sampled every 0.2 s

def sample():
    me = psutil.Process()
    while True:
        rss = 0
        for child in me.children(recursive=True):
            try:
                rss += child.memory_info().rss
            except psutil.Error:
                pass
        workers_mb[0] = max(workers_mb[0], rss / 2**20)
        time.sleep(0.2)

threading.Thread(target=sample, daemon=True).start()
t0 = time.perf_counter()
from plm_index.job import Job
from plm_core.settings import Settings
settings = Settings(progress=False, cache=False)  # PLM_INGEST_BATCH from the environment, default 64
job = Job.from_config(sys.argv[3], index_dir=sys.argv[2], settings=settings)
report = job.ingest([sys.argv[1]])
print(json.dumps({"wall_s": time.perf_counter() - t0, "peak_rss_mb": hwm_mb(), "workers_peak_mb": workers_mb[0],
                  "timings": report.timings}))
"""
)
RAW_QUERY = (
    HWM
    + """
import json, sys, time
t0 = time.perf_counter()
import bm25s, Stemmer
stemmer = Stemmer.Stemmer("english")
queries = json.loads(sys.argv[2])
t1 = time.perf_counter()
r = bm25s.BM25.load(sys.argv[1], mmap=True)
def ask(q):
    return r.retrieve(bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False), k=10,
                      show_progress=False, n_threads=1)
ask(queries[0])
t2 = time.perf_counter()
lat = []
for q in queries[1:]:
    s = time.perf_counter(); ask(q); lat.append(time.perf_counter() - s)
print(json.dumps({"import_s": t1 - t0, "cold_s": t2 - t1, "lat": lat, "peak_rss_mb": hwm_mb()}))
"""
)
PLM_QUERY = (
    HWM
    + """
import json, sys, time
t0 = time.perf_counter()
from plm_index.job import Job
from plm_core.settings import Settings
import bm25s, Stemmer  # imported before the clock starts, as on the raw side
queries = json.loads(sys.argv[3])
t1 = time.perf_counter()
job = Job.from_config(sys.argv[2], index_dir=sys.argv[1], settings=Settings(progress=False, cache=False))
job.retrieve(queries[0], k=10)
t2 = time.perf_counter()
lat = []
for q in queries[1:]:
    s = time.perf_counter(); job.retrieve(q, k=10); lat.append(time.perf_counter() - s)
print(json.dumps({"import_s": t1 - t0, "cold_s": t2 - t1, "lat": lat, "peak_rss_mb": hwm_mb()}))
"""
)


def make_corpus(n: int, path: Path, seed: int = 7) -> list[str]:
    """Write n documents to path (BEIR corpus.jsonl, cached) and return the vocabulary."""
    import numpy as np

    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "dar", "qu", "el", "zo", "bri", "un"]
    vocab = sorted({"".join(rng.choice(syllables, size=rng.integers(2, 5))) for _ in range(80_000)})[:50_000]
    if path.exists():
        return vocab
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks**1.07
    p /= p.sum()
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for start in range(0, n, 10_000):
            m = min(10_000, n - start)
            lengths = rng.integers(40, 121, size=m)
            words = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
            pos = 0
            for i, length in enumerate(lengths):
                text = " ".join(vocab[w] for w in words[pos : pos + length])
                pos += length
                out.write(json.dumps({"_id": f"d{start + i}", "title": "", "text": text}) + "\n")
    tmp.rename(path)
    return vocab


def run_py(code: str, *args: str) -> dict[str, Any]:
    # PYTHONSAFEPATH: `-c` puts the current folder ahead of PYTHONPATH, so a "before" run
    # (PYTHONPATH=<worktree>) started in the checkout would measure the checkout's code.
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def measure(n: int, work: Path, queries: list[str]) -> dict[str, Any]:
    folder = work / str(n)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.jsonl"
    t0 = time.perf_counter()
    make_corpus(n, corpus)
    print(f"[{n}] corpus ready in {time.perf_counter() - t0:.0f}s", flush=True)
    config = folder / "scale.toml"
    config.write_text(CONFIG)
    raw_dir, plm_dir = folder / "raw_bm25s", folder / "plm_index"
    for d in (raw_dir, plm_dir):
        shutil.rmtree(d, ignore_errors=True)
    raw = run_py(RAW_INGEST, str(corpus), str(raw_dir))
    print(f"[{n}] raw ingest {raw['wall_s']:.1f}s", flush=True)
    plm = run_py(PLM_INGEST, str(corpus), str(plm_dir), str(config))
    print(f"[{n}] plm ingest {plm['wall_s']:.1f}s {plm['timings']}", flush=True)
    qs = json.dumps(queries)
    raw_q = run_py(RAW_QUERY, str(raw_dir), qs)
    plm_q = run_py(PLM_QUERY, str(plm_dir), str(config), qs)
    sizes = {"raw_index": dir_size(raw_dir), "texts": corpus.stat().st_size, "plm": dir_size(plm_dir)}
    files = {str(p.relative_to(plm_dir)): p.stat().st_size for p in plm_dir.rglob("*") if p.is_file()}
    row = {
        "n": n,
        "ingest": {"raw_s": raw["wall_s"], "plm_s": plm["wall_s"], "ratio": plm["wall_s"] / raw["wall_s"]},
        "peak_rss_mb": {
            "raw": raw["peak_rss_mb"],
            "plm": plm["peak_rss_mb"],
            "plm_workers": plm.get("workers_peak_mb", 0.0),
        },
        "plm_timings": plm["timings"],
        "cold_start_s": {"raw": raw_q["cold_s"], "plm": plm_q["cold_s"]},
        "import_s": {"raw": raw_q["import_s"], "plm": plm_q["import_s"]},
        "query_ms": {
            side: {"p50": pct(r["lat"], 0.5), "p95": pct(r["lat"], 0.95)}
            for side, r in (("raw", raw_q), ("plm", plm_q))
        },
        "query_rss_mb": {"raw": raw_q["peak_rss_mb"], "plm": plm_q["peak_rss_mb"]},
        "bytes": {**sizes, "ratio": sizes["plm"] / (sizes["raw_index"] + sizes["texts"])},
        "plm_files": files,
    }
    print(json.dumps({k: v for k, v in row.items() if k != "plm_files"}), flush=True)
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(ns, [r["ingest"]["plm_s"] for r in rows], "o-", label="plm ingest (BM25 only)")
    a.plot(ns, [r["ingest"]["raw_s"] for r in rows], "s--", label="raw bm25s")
    a.set(xscale="log", yscale="log", xlabel="documents (= chunks)", ylabel="ingest wall time (s)")
    b.plot(ns, [r["query_ms"]["plm"]["p95"] for r in rows], "o-", label="plm query p95")
    b.plot(ns, [r["query_ms"]["raw"]["p95"] for r in rows], "s--", label="raw bm25s p95")
    b.set(xscale="log", yscale="log", xlabel="documents (= chunks)", ylabel="query latency p95 (ms, k = 10)")
    for ax in (a, b):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/plm-scale"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    import numpy as np

    rng = np.random.default_rng(11)
    rows = []
    for n in args.sizes:
        args.work.joinpath(str(n)).mkdir(parents=True, exist_ok=True)
        vocab = make_corpus(n, args.work / str(n) / "corpus.jsonl")
        queries = [" ".join(rng.choice(vocab[:5000], size=rng.integers(2, 6))) for _ in range(201)]
        rows.append(measure(n, args.work, queries))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
