"""Everything a plm stage needs, in one import: `import plm`.

A plugin is one module with one component class and a hook that registers it::

    import plm

    class Shout(plm.Reranker):
        name = "shout"

        class Config(plm.ComponentConfig):
            boost: float = 2.0

        def run(self, data: plm.Ranking) -> plm.Ranking:
            return plm.rescore(data, [self.config.boost * h.score for h in data.hits], self.label)

    @plm.hookimpl
    def plm_register_components(registry):
        registry.add(Shout)

plus an entry point in the package's pyproject (`[project.entry-points.plm] shout =
"my_package.shout"`). Then `use = "shout"` works in any config.

What is here:
- families: `Loader`, `Chunker`, `ChunkTransform`, `Embedder`, `QueryExpander`,
  `Retriever`, `Fuser`, `RankingStage`, `Reranker`, `Store`, `Executor`, `Tokenizer` (a
  part of the stage that tokenizes, e.g. `tokenizer = "snowball"` in a bm25s table), and `Index`
  for a stage that keeps an index derived from the store (`SavedIndex`: the same with a
  plain index/save/open_saved path; the runtime versions, checksums and swaps builds;
  `SegmentedIndex`: kept as segments a sync adds to, with `segment_settings`,
  `build_data(rows: Rows)`, `save_data`, `open_data`, `merge_data`);
- records: `Document`, `Chunk`, `Query`, `ExpandedQuery`, `EmbeddedQuery`, `ScoredChunk`,
  `FusionConfig`, `Hit` (`SourceScore`: an entry of `hit.sources`), `Ranking`, `LoadFailure`,
  `Snapshot` (what an index reads), `CorpusVersion`;
- `ComponentConfig` (a stage's settings), `hookimpl`, `Registry`, the errors;
- helpers: `top_n` (a score vector -> ranked candidates), `rescore` (a reranker's
  reorder-and-renumber), `compile_filters` (the metadata filter spec as a predicate),
  `stage_folder`/`save_build`/`open_build`/`build_matches`/`build_path` (build folders).

`plm.testing` (imported by tests only) checks that a store, tokenizer, retriever, fuser or
segmented index keeps its family's contract, one call each.

Importing `plm` loads the kernel (`plm_core`) only; the helpers load their part of the
index runtime (`plm_index`) when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plm_core.component import BaseComponent, ComponentConfig
from plm_core.errors import (
    ConfigError,
    IndexDamagedError,
    MissingDependencyError,
    ModelNotFoundError,
    PlmUserError,
    PluginError,
    StaleIndexError,
    StoreError,
)
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import (
    Chunker,
    ChunkTransform,
    Embedder,
    Executor,
    Fuser,
    Index,
    Loader,
    QueryExpander,
    RankingStage,
    Reranker,
    Retriever,
    Snapshot,
    Store,
    Tokenizer,
    require_embedder,
)
from plm_core.records import (
    Chunk,
    CorpusVersion,
    Document,
    EmbeddedQuery,
    ExpandedQuery,
    FusionConfig,
    Hit,
    LoadFailure,
    Query,
    Ranking,
    ScoredChunk,
    SourceScore,
)
from plm_core.registry import Registry

if TYPE_CHECKING:
    from plm_index.builds import SavedIndex, build_matches, build_path, open_build, save_build, stage_folder
    from plm_index.filters import compile_filters
    from plm_index.ranking import rescore, top_n

# name -> the runtime module it lives in, imported on first use
_LAZY = {
    "SavedIndex": "plm_index.builds",
    "SegmentedIndex": "plm_index.segments",
    "Rows": "plm_index.segments",
    "stage_folder": "plm_index.builds",
    "save_build": "plm_index.builds",
    "open_build": "plm_index.builds",
    "build_matches": "plm_index.builds",
    "build_path": "plm_index.builds",
    "compile_filters": "plm_index.filters",
    "rescore": "plm_index.ranking",
    "top_n": "plm_index.ranking",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "testing":  # the conformance kit (plm/testing.py), for a plugin's own tests
        return importlib.import_module("plm.testing")
    raise AttributeError(f"module 'plm' has no attribute {name!r}")


__all__ = [
    "BaseComponent",
    "Chunk",
    "ChunkTransform",
    "Chunker",
    "ComponentConfig",
    "ConfigError",
    "CorpusVersion",
    "Document",
    "EmbeddedQuery",
    "Embedder",
    "Executor",
    "ExpandedQuery",
    "Fuser",
    "FusionConfig",
    "Hit",
    "Index",
    "IndexDamagedError",
    "LoadFailure",
    "Loader",
    "MissingDependencyError",
    "ModelNotFoundError",
    "PlmUserError",
    "PluginError",
    "Query",
    "QueryExpander",
    "Ranking",
    "RankingStage",
    "Registry",
    "Reranker",
    "Retriever",
    "ScoredChunk",
    "Snapshot",
    "SourceScore",
    "StaleIndexError",
    "Store",
    "StoreError",
    "Tokenizer",
    "hookimpl",
    "require_embedder",
    # loaded on first use (_LAZY)
    "Rows",
    "SavedIndex",
    "SegmentedIndex",
    "build_matches",
    "build_path",
    "compile_filters",
    "open_build",
    "rescore",
    "save_build",
    "stage_folder",
    "top_n",
]
