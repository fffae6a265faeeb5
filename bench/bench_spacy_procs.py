"""spaCy entities with `n_process` 1 vs 2 on the same chunks (the sample corpus's, repeated),
interleaved rounds in one run; checks the entities are identical.

Usage: python bench/bench_spacy_procs.py [--repeat 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from plm_core.records import Chunk
from plm_plugins.chunkers.markdown_semantic import MarkdownSemanticChunker
from plm_plugins.enrichers.spacy_entities import SpacyEntityExtractor
from plm_plugins.loaders.markdown_dir import MarkdownLoader

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=8, help="copies of the corpus's chunks")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    docs = MarkdownLoader().run(str(ROOT / "examples" / "sample_corpus" / "docs"))
    base = MarkdownSemanticChunker().run(docs)
    chunks = [Chunk(id=f"{c.id}#{r}", doc_id=c.doc_id, text=c.text) for r in range(args.repeat) for c in base]
    stages = {n: SpacyEntityExtractor(n_process=n) for n in (1, 2)}
    for stage in stages.values():
        stage.ensure_warm()
    times: dict[int, list[float]] = {1: [], 2: []}
    results = {}
    for _ in range(args.rounds):
        for n, stage in stages.items():
            t0 = time.perf_counter()
            results[n] = [dict(c.entities) for c in stage.run(chunks)]
            times[n].append(time.perf_counter() - t0)
    assert results[1] == results[2], "n_process changed the entities"
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(json.dumps({"chunks": len(chunks), "n_process_1_s": one, "n_process_2_s": two, "speedup": one / two}))


if __name__ == "__main__":
    main()
