"""Peak memory and time of one BM25 build (`bm25s`, `bm25s_stem`) over N generated chunks
(Zipf words from a 50,000-word vocabulary, 40-120 words each), in this process, with a
digest of the postings so two versions of the build can be compared for identical output.

    python bench/bench_build_memory.py 300000
"""

from __future__ import annotations

import hashlib
import resource
import sys
import threading
import time

import numpy as np
import psutil


def texts_of(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    words = [f"w{i}ord" for i in range(50_000)]
    p = 1 / np.arange(1, 50_001)
    lengths = rng.integers(40, 120, n)
    picks = rng.choice(50_000, size=int(lengths.sum()), p=p / p.sum())
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return [" ".join(words[j] for j in picks[starts[i] : starts[i + 1]]) for i in range(n)]


def main() -> None:
    from plm_index.segments import Rows
    from plm_plugins.retrievers.bm25s import BM25Retriever

    n = int(sys.argv[1])
    texts = texts_of(n)
    retriever = BM25Retriever(label="bm25", tokenizer="bm25s_stem")
    rows = Rows(np.arange(1, n + 1), [f"c{i}" for i in range(n)], np.arange(n), texts=texts)
    workers_mb = [0.0]

    def sample() -> None:  # the tokenizing workers' memory, together (ru_maxrss of a child
        me = psutil.Process()  # spawned by fork and exec starts at its parent's)
        while True:
            rss = sum(c.memory_info().rss for c in me.children(recursive=True) if c.is_running())
            workers_mb[0] = max(workers_mb[0], rss / 2**20)
            time.sleep(0.1)

    threading.Thread(target=sample, daemon=True).start()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    data = retriever.build_data(rows)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    arrays = (data.indptr, data.rows, data.tf, data.dl, data.first)
    digest = hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:12]
    print(
        f"N={n} build {seconds:.1f}s rss before {base / 1024:.0f} MB peak {peak / 1024:.0f} MB "
        f"(+{(peak - base) / 1024:.0f}) workers {workers_mb[0]:.0f} MB digest {digest} vocab {len(data.vocab)}"
    )


if __name__ == "__main__":
    main()
