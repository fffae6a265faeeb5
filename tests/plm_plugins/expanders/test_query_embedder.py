from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plm_core.errors import ConfigError
from plm_core.records import EmbeddedQuery, ExpandedQuery, Query
from plm_plugins.expanders.embed_query import QueryEmbedder


class FakeEmbedder:
    model_name = "fake-model"

    def ensure_warm(self) -> None:
        pass

    def embed_query(self, text: str) -> Any:
        return np.full(4, len(text), dtype=np.float32)


def test_embeds_expanded_text_and_keeps_fields() -> None:
    stage = QueryEmbedder(embedder=FakeEmbedder())
    query = ExpandedQuery(text="rpo? RPO backup", k=3, id="q", original="rpo?", fired=("rpo",), filters={"a": 1})
    out = stage.run(query)
    assert isinstance(out, EmbeddedQuery)
    assert (out.text, out.k, out.id, out.original, out.fired, out.filters) == (
        "rpo? RPO backup",
        3,
        "q",
        "rpo?",
        ("rpo",),
        {"a": 1},
    )
    assert out.model == "fake-model" and out.vector.tolist() == [15.0] * 4
    plain = stage.run(Query(text="abc", k=2))  # a plain query is accepted too
    assert (plain.original, plain.fired, plain.vector.tolist()) == ("abc", (), [3.0] * 4)


def test_types_and_missing_embedder() -> None:
    assert (QueryEmbedder.family, QueryEmbedder.input_type, QueryEmbedder.output_type) == (
        "expanders",  # a query stage before retrieval, not an [embedder]
        ExpandedQuery,
        EmbeddedQuery,
    )
    stage = QueryEmbedder(embedder=None)
    with pytest.raises(ConfigError, match=r"\[embedder\]"):
        stage.run(ExpandedQuery(text="x"))
    with pytest.raises(ConfigError, match=r"\[embedder\]"):  # found when the job is assembled, too
        stage.check()
    assert QueryEmbedder.needs == ("embedder",)
