"""The POC's query side written out plainly (../shared/POC_SPEC.md sections 4-5), as a
reference for parity tests, and a generator of queries from a corpus's own words.

Nothing here imports plm: the expansion table, rank_bm25's Okapi, the dot products and
the RRF loop are the POC's own steps, so a test can compare plm's `poc_parity` with them
on any number of queries.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

# POC_SPEC section 4, in the POC's order.
EXPANSIONS: dict[str, str] = {
    "rpo": "recovery point objective RPO data loss backup",
    "recovery point objective": "RPO data loss backup disaster recovery",
    "rto": "recovery time objective RTO downtime recovery restore",
    "recovery time objective": "RTO downtime recovery restore disaster",
    "jwt": "JSON web token JWT authentication iat exp issued claims",
    "token": "JWT authentication token iat exp issued claims expiration",
    "database stack": "PostgreSQL Redis Kafka database storage data layer",
    "database": "PostgreSQL Redis Kafka storage data layer",
    "monitoring stack": "Prometheus Grafana Jaeger observability metrics tracing",
    "monitoring": "Prometheus Grafana Jaeger observability metrics tracing",
    "observability": "Prometheus Grafana Jaeger monitoring metrics tracing",
    "hpa": "horizontal pod autoscaler HPA scaling replicas CPU utilization",
    "autoscaling": "horizontal pod autoscaler HPA scaling replicas CPU utilization",
    "autoscaler": "horizontal pod autoscaler HPA scaling replicas CPU",
}


def expand(query: str) -> tuple[str, bool]:
    """POC_SPEC 4: (the expanded query, whether a trigger fired)."""
    lowered = query.lower()
    fired = [t for t in EXPANSIONS if t in lowered]
    if not fired:
        return query, False
    existing = set(lowered.split())
    words = {w for t in fired for w in EXPANSIONS[t].split()} - existing
    return (f"{query} {' '.join(sorted(words))}" if words else query), True


def poc_dot(matrix: Any, vector: Any) -> Any:
    """`np.dot(embeddings, q)` as the POC's run computed it: numpy's OpenBLAS on a 2-core
    machine, which splits the rows into two halves (the first ceil(n / 2)) and sums each
    half's rows with its 4-row kernel, the last rows of each half with another. Written as
    two single-threaded calls so the floats do not depend on this machine's thread count."""
    from threadpoolctl import threadpool_limits

    half = (len(matrix) + 1) // 2
    with threadpool_limits(1, user_api="blas"):
        return np.concatenate([np.dot(matrix[:half], vector), np.dot(matrix[half:], vector)])


def fuse(semantic: Any, bm25: Any, ids: Sequence[str], expanded: bool, k: int) -> list[str]:
    """POC_SPEC 5: the top-k chunk ids of the POC's weighted RRF of two full score vectors."""
    if expanded:
        bm25_weight, sem_weight, rrf_k, candidates = 3.0, 0.3, 10, min(k * 20, len(ids))
    else:
        bm25_weight, sem_weight, rrf_k, candidates = 1.0, 1.0, 60, min(k * 10, len(ids))
    scores: dict[str, float] = {}
    for r, i in enumerate(np.argsort(semantic)[::-1][:candidates]):
        scores[ids[i]] = scores.get(ids[i], 0) + sem_weight / (rrf_k + r)
    for r, i in enumerate(np.argsort(bm25)[::-1][:candidates]):
        scores[ids[i]] = scores.get(ids[i], 0) + bm25_weight / (rrf_k + r)
    return [cid for cid, _ in sorted(scores.items(), key=lambda item: item[1], reverse=True)[:k]]


def generate_queries(texts: Sequence[str], n: int, seed: int) -> list[str]:
    """`n` queries of 1 to 12 words drawn from the texts' own whitespace words (their
    casing and punctuation kept): stop words (in more than half of the texts, so rank_bm25
    floors their IDF), common and rare words, words with an expansion trigger inside
    ("tokens", "purpose"), the odd unknown word and repeated word, mixed at random."""
    df: Counter[str] = Counter()
    surface: dict[str, list[str]] = {}
    for text in texts:
        words = text.split()
        for word in set(words):
            df[word.lower()] += 1
        for word in words[:400]:
            forms = surface.setdefault(word.lower(), [])
            if len(forms) < 3 and word not in forms:
                forms.append(word)
    by_df = sorted(df, key=lambda w: (-df[w], w))
    half = len(texts) / 2
    stop = [w for w in by_df if df[w] > half]
    common = [w for w in by_df[:5000] if df[w] <= half]
    rare = sorted(w for w in by_df if df[w] <= 2)
    triggers = sorted(w for w in by_df if any(t in w for t in EXPANSIONS))
    pools = [stop, common, common, rare, triggers]
    rng = random.Random(seed)
    queries = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(1, 12)):
            roll = rng.random()
            if roll < 0.03:
                words.append(f"zz{rng.randrange(10**6)}")  # not in the corpus
            elif roll < 0.08 and words:
                words.append(rng.choice(words))  # counted twice, as rank_bm25 does
            else:
                pool = pools[rng.randrange(len(pools))] or common
                if pool is common:  # frequent words more often, as people type them
                    word = pool[min(int(rng.expovariate(1.0) * len(pool) / 8), len(pool) - 1)]
                else:
                    word = rng.choice(pool)
                words.append(rng.choice(surface.get(word, [word])))
        queries.append(" ".join(words))
    return queries
