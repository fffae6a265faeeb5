"""Opening a saved build at N chunks: what verifying it by content costs.

Builds, like `plm ingest` saves them, a BM25 index (bm25s, N synthetic chunks of 40-120
Zipf words) and an N x 384 float32 vectors build (MiniLM's size), then times in fresh
processes, per build (median of --repeat runs):

- stat: each file's size and mtime checked, as the saved "verified" stamp did before
  (it trusted a build whose bytes changed in place);
- first open: `open_build` as now, every file checksummed by content (CRC32), page cache
  warm (the build was just written or read);
- again: a second `open_build` of the same build in that process (skipped: checksummed
  once per process);
- load: what opening costs anyway, imports apart (bm25s.BM25.load with mmap; np.load of
  the vectors, memory-mapped: a dense query then reads every page of it).

Usage: python bench/bench_build_open.py [--chunks 100000] [--repeat 5] [--work /tmp/plm-open]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TIMER = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from plm_index import builds
import numpy as np
path, kind = Path(sys.argv[1]), sys.argv[2]
if kind == "bm25":
    import bm25s
meta = builds.read_meta(path)
t0 = time.perf_counter()
for name, (size, _) in meta["files"].items():
    st = (path / name).stat()
    assert st.st_size == size and st.st_mtime_ns
t1 = time.perf_counter()
builds.verify(path, meta["files"])
t2 = time.perf_counter()
builds.verify(path, meta["files"])
t3 = time.perf_counter()
if kind == "bm25":
    bm25s.BM25.load(str(path), mmap=True, load_corpus=False, show_progress=False)
else:
    np.load(path / "vectors.npy", mmap_mode="r")
t4 = time.perf_counter()
print(json.dumps({"stat": t1 - t0, "first open": t2 - t1, "again": t3 - t2, "load": t4 - t3}))
"""


def make_builds(work: Path, n: int) -> dict[str, Path]:
    import bm25s
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from plm_index import builds

    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(50_000)])
    ranks = np.minimum(rng.zipf(1.3, size=n * 120), 50_000) - 1
    lengths = rng.integers(40, 121, size=n)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(vocab[ranks[at : at + length]]))
        at += length
    retriever = bm25s.BM25(method="lucene")
    retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
    vectors = rng.normal(size=(n, 384)).astype(np.float32)
    out = {"bm25": work / "bm25" / "v1-x", "vectors": work / "vectors" / "v1-x"}
    builds.save_build(out["bm25"], lambda f: retriever.save(str(f), show_progress=False), {"version": "1"})
    builds.save_build(out["vectors"], lambda f: np.save(f / "vectors.npy", vectors), {"version": "1"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/plm-open"))
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    paths = make_builds(args.work, args.chunks)
    for kind, path in paths.items():
        size = sum(p.stat().st_size for p in path.iterdir())
        runs = [
            json.loads(subprocess.check_output([sys.executable, "-c", TIMER, str(path), kind, str(ROOT)], text=True))
            for _ in range(args.repeat)
        ]
        ms = {key: round(1000 * statistics.median(r[key] for r in runs), 1) for key in runs[0]}
        print(f"{kind}: {args.chunks} chunks, {size / 1e6:.1f} MB; median ms over {args.repeat} processes: {ms}")
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
