"""The built-in ranking stage keeps the rankers contract (`plm.testing.check_ranking_stage`),
with its defaults and keeping more hits per document (the cross-encoder reranker's run is in
tests/plm_plugins/rerankers/test_cross_encoder.py, on a tiny model built there)."""

from __future__ import annotations

import plm
import plm.testing


def test_collapse_keeps_the_contract() -> None:
    cls = plm.default_registry().get("collapse", "rankers").cls
    plm.testing.check_ranking_stage(cls())
    plm.testing.check_ranking_stage(cls(per_doc=2, depth_factor=3))
