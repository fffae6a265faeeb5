"""The cost of each BM25 tokenizer: build (tokenize + index + save) and query time, one run.

Every side is plm's BM25Retriever with the same scoring (Lucene, k1 1.5, b 0.75, float32);
only the tokenizer differs, so the ratios to `bm25s_stem` are the tokenizer's cost. Sides
run in the same process, alternating order each repetition, single-threaded: the machine
is shared and noisy, so the within-run ratios are the comparable numbers. Corpora:
poc_needle's pages (Markdown, full of names) and SciFact's abstracts (title + text).
Build = best of --build-reps; query = median over --query-reps passes of one query at a
time (k=10) over every query of the corpus's sets.

    python bench/bench_tokenizers.py --json bench/results/tokenizers.json
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from plm_core.records import Chunk, CorpusVersion, ExpandedQuery  # noqa: E402
from plm_index.corpus import CorpusSnapshot  # noqa: E402
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
BASELINE = "bm25s_stem"
# label -> the bm25s `tokenizer` value
TOKENIZERS: dict[str, Any] = {
    "whitespace_lower": "whitespace_lower",
    "bm25s_stem": "bm25s_stem",
    "snowball (english)": {"use": "snowball", "language": "english"},
    "identifiers (tuned)": {"use": "identifiers", "keep_whole": False},
    "identifiers (defaults)": "identifiers",
    "identifiers (stem, stopwords)": {"use": "identifiers", "stem": True, "stopwords": True},
}


def load(root: Path, query_files: list[str]) -> tuple[list[str], list[str]]:
    texts = []
    for line in (root / "corpus.jsonl").open():
        rec = json.loads(line)
        texts.append(f"{rec.get('title') or ''} {rec['text']}".strip())
    queries = [json.loads(line)["text"] for name in query_files for line in (root / name).open() if line.strip()]
    return texts, queries


def bench_corpus(name: str, texts: list[str], queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(texts)]
    snapshot = CorpusSnapshot.of(chunks, version=CorpusVersion("bench", 1))
    builds: dict[str, list[float]] = {label: [] for label in TOKENIZERS}
    passes: dict[str, list[float]] = {label: [] for label in TOKENIZERS}
    retrievers: dict[str, BM25Retriever] = {}
    labels = list(TOKENIZERS)
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.build_reps):
            for label in labels if rep % 2 == 0 else labels[::-1]:
                r = BM25Retriever(tokenizer=TOKENIZERS[label], method="lucene", dtype="float32")
                t0 = time.perf_counter()
                r.build(snapshot, Path(tmp) / f"{rep}-{labels.index(label)}")
                builds[label].append(time.perf_counter() - t0)
                retrievers[label] = r
        for label in labels:
            retrievers[label].search(ExpandedQuery(text=queries[0], k=10), 10)  # warm-up
        for rep in range(args.query_reps):
            for label in labels if rep % 2 == 0 else labels[::-1]:
                r = retrievers[label]
                t0 = time.perf_counter()
                for text in queries:
                    r.search(ExpandedQuery(text=text, k=10), 10)
                passes[label].append((time.perf_counter() - t0) / len(queries))
        tokens = {label: retrievers[label].tokenize(texts) for label in labels}
    base_build, base_query = min(builds[BASELINE]), statistics.median(passes[BASELINE])
    rows = {}
    for label in labels:
        build, query = min(builds[label]), statistics.median(passes[label])
        rows[label] = {
            "build_s": build,
            "query_ms": query * 1000,
            "build_ratio": build / base_build,
            "query_ratio": query / base_query,
            "tokens_per_doc": sum(map(len, tokens[label])) / len(texts),
            "vocabulary": len({t for doc in tokens[label] for t in doc}),
        }
    return {"corpus": name, "docs": len(texts), "queries": len(queries), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=Path, default=DATASETS)
    ap.add_argument("--build-reps", type=int, default=3, help="builds per tokenizer; best is reported")
    ap.add_argument("--query-reps", type=int, default=5, help="passes over the queries; median is reported")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    needle = args.datasets / "poc_needle"
    corpora = {
        "poc_needle": load(needle, [f"queries/{s}.jsonl" for s in ("needle", "informed", "realistic50")]),
        "scifact": load(args.datasets / "scifact", ["queries.jsonl"]),
    }
    results = [bench_corpus(name, *data, args) for name, data in corpora.items()]
    print(f"{'corpus':<11} {'tokenizer':<30} {'build s':>8} {'x stem':>7} {'query ms':>9} {'x stem':>7} "
          f"{'tok/doc':>8} {'vocab':>8}")  # fmt: skip
    for res in results:
        for label, r in res["rows"].items():
            print(
                f"{res['corpus']:<11} {label:<30} {r['build_s']:8.2f} {r['build_ratio']:7.2f} {r['query_ms']:9.3f} "
                f"{r['query_ratio']:7.2f} {r['tokens_per_doc']:8.1f} {r['vocabulary']:8d}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
