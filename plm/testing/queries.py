"""The checks of the stages that prepare a query: an expander (`check_expander`) and a stage
of a family with no check of its own (`check_stage`, e.g. a third party's `normalizers`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from plm.testing.rules import checking
from plm_core.component import BaseComponent
from plm_core.interfaces import QueryExpander
from plm_core.records import ExpandedQuery, Query

QUERY_TEXTS = ["how do I restart a pod", "node memory limits", "k8s", "Ünïcode café"]


def _queries(texts: Sequence[str]) -> list[Query]:
    return [
        Query(text=t, k=3, depth=7, id=f"q{i}", filters={"team": "a"}, weights={"bm25": 0.5})
        for i, t in enumerate(texts)
    ]


def check_expander(expander: QueryExpander, texts: Sequence[str] | None = None) -> None:
    """`texts`: query texts (default: a question, keywords, an abbreviation, non-ASCII).
    `run(query)` is a `plm.ExpandedQuery` (or an EmbeddedQuery) with text to search for,
    keeping what the user asked (`k`, `depth`, `filters`, `id`, `weights`) and, as
    `original`, the user's text, also after another expander (a chained query keeps the
    first text); the same every time."""
    with checking("expanders") as rules:
        expander.ensure_warm()
        for query in _queries(texts or QUERY_TEXTS):
            with rules.part(f"expanding {query.text!r}"):
                out = expander.run(query)
                rules.require(isinstance(out, ExpandedQuery), "run returns a plm.ExpandedQuery", repr(type(out)))
                rules.expect(isinstance(out.text, str) and out.text.strip(), "the expanded query has text", repr(out))
                kept = {f: (getattr(query, f), getattr(out, f)) for f in ("k", "depth", "filters", "id", "weights")}
                lost = {f: pair for f, pair in kept.items() if pair[0] != pair[1]}
                rules.expect(not lost, "the query's k, depth, filters, id and weights are kept", f"{lost}")
                rules.expect(out.original == query.text, "`original` is the user's text", repr(out.original))
                rules.expect(_same(expander.run(query), out), "the same query gives the same expansion")
                chained = expander.run(replace(ExpandedQuery.of(query), text=query.text + " more"))
                rules.expect(
                    isinstance(chained, ExpandedQuery) and chained.original == query.text,
                    "after another expander, `original` stays the user's first text",
                    repr(getattr(chained, "original", chained)),
                )


def _same(a: Any, b: Any) -> bool:
    """Equal, a vector compared by value (a numpy array has no truth value)."""
    import numpy as np

    va, vb = getattr(a, "vector", None), getattr(b, "vector", None)
    if va is not None or vb is not None:
        if va is None or vb is None or not np.allclose(np.asarray(va), np.asarray(vb)):
            return False
        a, b = replace(a, vector=None), replace(b, vector=None)
    return bool(a == b)


def check_stage(stage: BaseComponent[Any, Any], inputs: Sequence[Any]) -> None:
    """Any stage, on `inputs` (what its `run` takes): it returns its `output_type`, the same
    for the same input every time, and a new instance with the same config gives the same.
    For a family with a base of its own but no check here (a third party's new family)."""
    with checking(str(stage.family)) as rules:
        stage.ensure_warm()
        fresh = type(stage)(stage.config)
        fresh.ensure_warm()
        out_type = getattr(stage.output_type, "__origin__", stage.output_type)
        for data in inputs:
            with rules.part(f"running on {data!r}"[:80]):
                out = stage.run(data)
                if isinstance(out_type, type) and out_type is not object:
                    rules.expect(isinstance(out, out_type), f"run returns a {out_type.__name__}", repr(type(out)))
                rules.expect(_same(stage.run(data), out), "the same input gives the same output", repr(out)[:120])
                rules.expect(_same(fresh.run(data), out), "a new instance with the same config gives the same")
