"""Document-level collapse: at most `per_doc` chunks of each document in the final list
(Elasticsearch's `collapse`), for users who want documents, not chunks.

    [query.collapse]
    use = "collapse"
    per_doc = 1

It runs after `[query.retrieve]`: it asks retrieval for `depth_factor` x k candidates (at
most 10,000), keeps each document's best `per_doc` chunks in rank order, renumbers ranks
from 1 and leaves scores and per-source ranks as they were; the core then cuts to k. k
distinct documents come back whenever k documents have a chunk among those candidates:
raise `depth_factor` when a few documents own many near-identical top chunks.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pydantic import Field

from plm import ComponentConfig, Hit, Ranking, RankingStage, hookimpl

if TYPE_CHECKING:
    from plm import Registry

MAX_DEPTH = 10_000


class DocCollapse(RankingStage):
    """Keeps each document's best `per_doc` hits; the rest of the order is unchanged."""

    name = "collapse"

    class Config(ComponentConfig):
        per_doc: int = Field(1, ge=1, le=MAX_DEPTH)
        """At most this many chunks of one document in the results (1: one hit per document)."""
        depth_factor: int = Field(5, ge=1, le=MAX_DEPTH)
        """Candidates asked of retrieval = k x this (at most 10,000), so that k documents are
        left after collapsing when they exist."""

    config: Config

    def depth(self, k: int) -> int:
        return max(k, min(k * self.config.depth_factor, MAX_DEPTH))

    def run(self, data: Ranking) -> Ranking:
        kept: list[Hit] = []
        seen: dict[str, int] = {}  # doc id -> hits kept
        for hit in data.hits:
            count = seen.get(hit.doc_id, 0)
            if count < self.config.per_doc:
                seen[hit.doc_id] = count + 1
                kept.append(dataclasses.replace(hit, rank=len(kept) + 1))
        return Ranking(query=data.query, hits=tuple(kept), fusion=data.fusion)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(DocCollapse)
