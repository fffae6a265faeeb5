"""Evaluation: a chunk view and standard doc-level IR metrics (via ir-measures).

Chunk view (what the proof of concept reported, POC_SPEC section 6): among the top
`chunk_k` chunks, the 1-based rank of the first chunk whose doc is relevant; Hit@1, Hit@k
and MRR over those chunks. Doc view: the chunk ranking of a deeper retrieval (`doc_k`
chunks) turned into a doc ranking by first occurrence, scored with ir-measures (nDCG@10,
R@100, RR@10 by default; graded qrels). The two views use separate retrievals, the POC's
protocol: fusion candidates grow with k (`candidates_factor`), so the top chunk_k of a search
at doc_k can differ from a search at chunk_k (RRF's sums gain the deeper candidates; DBSF
normalises over them). How many queries differ is counted (`rankings_differ`); with
`one_ranking`, both views come from the one deeper search.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import Field, field_validator

from plm.evaluation import Evaluator
from plm_core.component import ComponentConfig
from plm_core.errors import MissingDependencyError
from plm_core.hookspecs import hookimpl
from plm_core.records import Query
from plm_eval.dataset import QuerySet
from plm_index.progress import progress_iter


def doc_ranking(doc_ids: Sequence[str]) -> list[str]:
    """Chunk hits' doc ids -> docs in order of first occurrence."""
    return list(dict.fromkeys(doc_ids))


def chunk_view(chunk_docs: Sequence[str], relevant: Mapping[str, int], k: int) -> int | None:
    """1-based rank of the first relevant chunk within the top k, else None."""
    for i, doc in enumerate(chunk_docs[:k], 1):
        if relevant.get(doc, 0) > 0:
            return i
    return None


def ir_scores(
    doc_runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], measures: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Per-query values {measure: {qid: value}}; queries with no retrieved doc score 0."""
    try:
        import ir_measures
    except ImportError:
        raise MissingDependencyError("ir-measures", "eval") from None
    parsed = [ir_measures.parse_measure(m) for m in measures]
    qrel_list = [
        ir_measures.Qrel(qid, did, int(g)) for qid, docs in qrels.items() if qid in doc_runs for did, g in docs.items()
    ]
    run = [
        ir_measures.ScoredDoc(qid, did, float(len(docs) - i))
        for qid, docs in doc_runs.items()
        for i, did in enumerate(docs)
    ]
    out: dict[str, dict[str, float]] = {m: {qid: 0.0 for qid in doc_runs} for m in measures}
    names = {str(p): m for p, m in zip(parsed, measures, strict=True)}
    for metric in ir_measures.iter_calc(parsed, qrel_list, run):
        out[names[str(metric.measure)]][metric.query_id] = float(metric.value)
    return out


class IRMetricsEvaluator(Evaluator):
    """Runs a query set through a job and scores it in both views."""

    name = "ir_metrics"

    class Config(ComponentConfig):
        chunk_k: int = Field(5, ge=1)
        """Chunks retrieved for the chunk view (Hit@1, Hit@k and MRR over the top chunk_k)."""
        doc_k: int = Field(100, ge=1)
        """Chunks retrieved for the doc view (at least chunk_k are), turned into a doc ranking
        by first occurrence; the doc measures see at most this many docs."""
        measures: list[str] = ["nDCG@10", "R@100", "RR@10"]
        """ir-measures names scored on the doc ranking, e.g. "nDCG@10", "R@100", "RR@10", "P@5",
        "AP"; each becomes a metric of the report."""
        one_ranking: bool = False
        """Score the chunk view on the top chunk_k of the doc view's search (one ranking per
        query, as trec_eval sees a run) instead of a search at chunk_k (the POC's protocol)."""

        @field_validator("measures")
        @classmethod
        def _known_measures(cls, value: list[str]) -> list[str]:
            try:
                import ir_measures
            except ImportError:
                return value  # said when the evaluator runs
            if not value:
                raise ValueError('give at least one measure, e.g. ["nDCG@10"]')
            seen: dict[str, str] = {}
            for name in value:
                try:
                    parsed = str(ir_measures.parse_measure(name))
                except (ValueError, NameError, SyntaxError, TypeError) as err:
                    raise ValueError(f"{name!r} is not an ir-measures name (e.g. nDCG@10, AP, P@5): {err}") from None
                if parsed in seen:
                    raise ValueError(f"{name!r} and {seen[parsed]!r} are the same measure ({parsed}): keep one")
                seen[parsed] = name
            return value

    config: Config

    def metric_names(self) -> list[str]:
        """The metrics `evaluate` reports, in its order."""
        return ["Hit@1", f"Hit@{self.config.chunk_k}", "MRR", *self.config.measures]

    def evaluate(self, job: Any, qset: QuerySet, progress: bool = False) -> dict[str, Any]:
        k = self.config.chunk_k
        per_query: list[dict[str, Any]] = []
        doc_runs: dict[str, list[str]] = {}
        stage_time: dict[str, float] = {}
        differ = 0
        t0 = time.perf_counter()
        if qset.queries:  # loading the model and the indexes is not a query's time: done first
            job.search(Query(text="warm up", k=k))
        warm_up = time.perf_counter() - t0
        for qid, text in progress_iter(list(qset.queries.items()), f"queries {qset.name}", progress):
            deep_query = Query(text=text, k=max(self.config.doc_k, k), id=qid)
            if self.config.one_ranking:
                deep, timings = job.search(deep_query)
                ranking = replace(deep, hits=deep.hits[:k])
            else:
                ranking, timings = job.search(Query(text=text, k=k, id=qid))  # timed: the first search
                deep, _ = job.search(deep_query)
                differ += [h.chunk_id for h in ranking.hits] != [h.chunk_id for h in deep.hits[:k]]
            for name, sec in timings.items():
                stage_time[name] = stage_time.get(name, 0.0) + sec
            doc_runs[qid] = doc_ranking([h.doc_id for h in deep.hits])
            chunk_docs = [h.doc_id for h in ranking.hits]
            rank = chunk_view(chunk_docs, qset.qrels[qid], k)
            per_query.append(
                {
                    "query_id": qid,
                    "query": text,
                    "expanded": ranking.query.text,
                    "fired": list(ranking.query.fired),
                    "relevant": sorted(qset.qrels[qid]),
                    "rank": rank,
                    "chunks": [h.chunk_id for h in ranking.hits],
                    "docs": chunk_docs,
                    # Where the first relevant doc sits in the deep doc ranking (None: not in it);
                    # what `plm eval --per-query` shows when two configs disagree.
                    "doc_rank": chunk_view(doc_runs[qid], qset.qrels[qid], len(doc_runs[qid])),
                    # The chunk view per query, named like the aggregates they average to.
                    "Hit@1": float(rank == 1),
                    f"Hit@{k}": float(rank is not None),
                    "MRR": 1.0 / rank if rank else 0.0,
                }
            )
        elapsed = time.perf_counter() - t0
        n = len(per_query)
        scores = ir_scores(doc_runs, qset.qrels, self.config.measures)
        for row in per_query:
            row.update({m: round(scores[m][row["query_id"]], 6) for m in self.config.measures})
        ranks = [r["rank"] for r in per_query]
        metrics = {
            "Hit@1": sum(r == 1 for r in ranks) / n if n else 0.0,
            f"Hit@{k}": sum(r is not None for r in ranks) / n if n else 0.0,
            "MRR": sum(1.0 / r for r in ranks if r) / n if n else 0.0,
        }
        metrics.update({m: sum(scores[m].values()) / n if n else 0.0 for m in self.config.measures})
        return {
            "set": qset.name,
            "queries": n,
            "metrics": metrics,
            "ms_per_query": {s: 1000 * t / n for s, t in stage_time.items()} if n else {},
            "warm_up_s": round(warm_up, 3),  # the untimed first search: model and indexes loaded
            "seconds": elapsed,
            # Queries whose chunk-view search found other top chunk_k than the doc view's (0 with one_ranking).
            "rankings_differ": differ,
            "one_ranking": self.config.one_ranking,
            "per_query": per_query,
            "run": doc_runs,  # each query's doc ranking: the run the doc measures score
        }


@hookimpl
def plm_register_components(registry: Any) -> None:
    registry.add(IRMetricsEvaluator)
