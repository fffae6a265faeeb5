"""Stages whose entry points (pyproject's `[project.entry-points.plm]`) an installed copy of
plm may not list yet: an editable install made before they were added reads its entry
points from old metadata until `pip install -e .` is run again. Registered from here, by a
built-in that is listed, only while their own entry point is missing, so a stage is never
registered twice. Empty this list once the install is refreshed everywhere."""

from __future__ import annotations

import importlib
import importlib.metadata as md
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plm import Registry

PENDING = {
    "headings": "plm_plugins.query_generators.headings",
    "inverse_cloze": "plm_plugins.query_generators.inverse_cloze",
    "links": "plm_plugins.query_generators.links",
    "bm25_rm3": "plm_plugins.retrievers.bm25_rm3",
    "dense_rocchio": "plm_plugins.retrievers.dense_rocchio",
}


def register_pending(registry: Registry) -> None:
    listed = {ep.name for ep in md.entry_points(group="plm")}
    for name, module in PENDING.items():
        if name not in listed:
            importlib.import_module(module).plm_register_components(registry)
