"""The hybrid stage keeps the retrieval contract (`plm.testing.check_retrieval`) with BM25
and dense retrievers fused by RRF or by a linear fusion, and with one retriever alone."""

from __future__ import annotations

import pytest
from plm_needs import needs

import plm
import plm.testing

pytestmark = needs("bm25s", extra="bm25")


def _part(name: str, family: str) -> object:
    return plm.default_registry().get(name, family).cls()


def _hybrid(retrievers: dict[str, str], fuser: str) -> plm.Retrieval:
    """The hybrid stage with its parts built here, as the runtime builds them from the tables."""
    cls = plm.default_registry().get("hybrid", "retrieval").cls
    tables = cls.Config(retrievers={k: {"use": v} for k, v in retrievers.items()}, fuser={"use": fuser})
    parts = {k: _part(v, "retrievers") for k, v in retrievers.items()}
    return cls(tables, retrievers=parts, fuser=_part(fuser, "fusers"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("fuser", ["rrf", "linear"])
def test_hybrid_keeps_the_contract(fuser: str) -> None:
    plm.testing.check_retrieval(_hybrid({"dense": "dense", "bm25": "bm25s"}, fuser))


def test_hybrid_of_one_retriever_keeps_the_contract() -> None:
    plm.testing.check_retrieval(_hybrid({"bm25": "bm25s"}, "rrf"))
