"""The query-embedding stage: an expanded query -> the same query with its vector.

It uses the job's shared [embedder], the one the chunks were embedded with, so query
and chunk vectors always come from the same model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plm_core.component import BaseComponent, ComponentConfig
from plm_core.errors import ConfigError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Embedder
from plm_core.records import EmbeddedQuery, ExpandedQuery

if TYPE_CHECKING:
    from plm_core.registry import Registry


class QueryEmbedder(BaseComponent[ExpandedQuery, EmbeddedQuery]):
    """Embeds the (expanded) query text with the job's embedder."""

    name = "embed_query"
    family = "embedders"
    input_type = ExpandedQuery
    output_type = EmbeddedQuery
    needs = ("embedder",)
    embedder: Embedder | None

    class Config(ComponentConfig):
        pass

    def check(self) -> None:
        if self.embedder is None:
            raise ConfigError(
                f"query stage {self.label!r} ({self.name}) needs the job's embedder: add an [embedder] "
                'table (e.g. use = "sentence_transformers") to the config, or remove this stage'
            )

    def run(self, data: ExpandedQuery) -> EmbeddedQuery:
        self.check()
        assert self.embedder is not None
        self.embedder.ensure_warm()
        return EmbeddedQuery.with_vector(data, self.embedder.embed_query(data.text), self.embedder.model_name)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(QueryEmbedder)
