"""POC parity of the query side: dictionary expansion, BM25, dense, RRF on the real corpus.

Uses the session's real poc_parity index of poc_needle (fixture `poc_needle_run`, MiniLM
as in the POC's reference run) and compares each list that fed the fusion with the POC's
own outputs, for all 120 queries.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from plm_core.records import Query

pytestmark = [pytest.mark.dataset, pytest.mark.slow]

SETS = ("needle", "informed", "realistic50")
LISTS = ("expanded", "fired", "bm25_only", "semantic_only", "hybrid")


@pytest.fixture(scope="module")
def poc(poc_needle_run: tuple[Any, dict]) -> SimpleNamespace:
    # The real job's own stages over the index it built from the POC corpus: the
    # dictionary expander first, then the query embedder, the hybrid stage (BM25 + dense +
    # RRF) last.
    job, _ = poc_needle_run
    return SimpleNamespace(expander=job.query_stages[0], embed=job.query_stages[1], hybrid=job.query_stages[-1])


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
            embedded = poc.embed.run(query)
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
