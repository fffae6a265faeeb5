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

What is here (every built-in stage in `plm_plugins` imports plm's names from here only,
as a third party must: a test holds them to it):
- families: `Loader`, `Converter` (a file format -> Markdown text: `Converted`), `Chunker`,
  `ChunkTransform`, `Embedder`, `QueryExpander`,
  `QueryGenerator` (synthetic judged queries from the corpus: `plm eval --synthetic N`),
  `Evaluator` (a query set scored: `[job] evaluator`), `Reporter` (`plm eval`'s comparison),
  `Retrieval` (the `[query.retrieve]` stage), `Retriever`, `Fuser`, `RankingStage`,
  `Reranker`, `Store`, `Executor`, `Tokenizer` (a part of the stage that tokenizes, e.g.
  `tokenizer = "snowball"` in a bm25s table), and `Index`
  for a stage that keeps an index derived from the store (`SavedIndex`: the same with a
  plain index/save/open_saved path; the runtime versions, checksums and swaps builds;
  `SegmentedIndex`: kept as segments a sync adds to, with `segment_settings`,
  `build_data(rows: Rows)`, `save_data`, `open_data`, `merge_data`; `State` the segments a search reads, `Picked`
  their rows' chunk ids). A stage's family is its base's: `plm plugins` lists it where a
  slot of that family takes it;
- records: `Document`, `Chunk`, `Query`, `ExpandedQuery`, `EmbeddedQuery`, `ScoredChunk`,
  `FusionConfig`, `Hit` (`SourceScore`: an entry of `hit.sources`), `Ranking`, `LoadFailure`,
  `CorpusVersion`, `SyntheticQuery` (what a query generator makes), `BatchResult` and
  `StoreProblem` (what executors and stores report);
- what the runtime hands a stage (protocols): `Snapshot` (what an index reads), `Corpus`
  (`needs = ("corpus",)`: filter masks and hits for a retrieval stage), `Settings` (`needs =
  ("settings",)`; `load_settings` reads them), `BatchProcessor` and `ProcessorFactory` (an
  executor's work);
- `ComponentConfig` (a stage's settings), `hookimpl`, `Registry` (`default_registry()`:
  every installed plugin's, to resolve a part given by name), the errors;
- helpers: `top_n` (a score vector -> ranked candidates), `rescore` (a reranker's
  reorder-and-renumber; `BEFORE`: the `hit.sources` key of the rank it had before),
  `compile_filters` (the metadata filter spec as a predicate; `normalize_filters`,
  `RANGE_OPS`, `as_date` for a store that translates the spec to its own query language),
  `stage_folder`/`save_build`/`open_build`/`build_matches`/`build_path` (build folders),
  `load_npy`, `save_ids`/`load_ids` (`take_ids`: many ids at once), `save_vectors`/`load_vectors`, `IDS_FILE`,
  `VECTORS_FILE` (memory-mapped columns beside an index's files);
- for loaders: `document_from_record` (a record -> a checked document), `check_document`,
  `check_id`, `record_id`, `merge_metadata_field`, `MissingFieldError`, `MAX_METADATA_INT`,
  `front_matter_lines` (how many leading lines are YAML front matter), and `inside` (whether
  a path, links resolved, stays inside a folder);
- for stages that call a service: `bearer_key` (an API key from the environment), `scrub`
  (a message with any key in it masked),
  `NO_REDIRECTS` and `RedirectRefused` (a credential never follows a redirect).

`plm.testing` (imported by tests only) checks that a store, tokenizer, retriever, fuser,
segmented index or query generator keeps its family's contract, one call each.

For library users, `plm.Job` is the runtime's facade: `plm.Job.from_config(path)`, then
`ingest`, `retrieve`, `search`, `sync`, `close`.

Layers: `import plm` loads the kernel (`plm_core`) only; the helpers and `Job` load their part
of the index runtime (`plm_index`) when first used. So `plm` sits above both: plm_core <
plm_index < plm < plm_plugins (and plm_index, plm_eval, plm_serve never import `plm_plugins`).
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
from plm_core.evaluation import Evaluator, QueryGenerator, Reporter
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import (
    BatchProcessor,
    Chunker,
    ChunkTransform,
    Converter,
    Embedder,
    Executor,
    Fuser,
    Index,
    Loader,
    ProcessorFactory,
    QueryExpander,
    RankingStage,
    Reranker,
    Retrieval,
    Retriever,
    Store,
    Tokenizer,
    require_embedder,
)
from plm_core.protocols import Corpus, Snapshot
from plm_core.records import (
    BatchResult,
    Chunk,
    Converted,
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
    StoreProblem,
    SyntheticQuery,
    fused_ranking,
)
from plm_core.registry import Registry, default_registry
from plm_core.settings import Settings, load_settings

if TYPE_CHECKING:
    from plm_index.builds import (
        SavedIndex,
        build_matches,
        build_path,
        load_npy,
        open_build,
        save_build,
        stage_folder,
    )
    from plm_index.columns import IDS_FILE, VECTORS_FILE, load_ids, load_vectors, save_ids, save_vectors, take_ids
    from plm_index.documents import (
        MAX_METADATA_INT,
        MissingFieldError,
        check_document,
        check_id,
        document_from_record,
        front_matter_lines,
        merge_metadata_field,
        record_id,
    )
    from plm_index.filters import RANGE_OPS, as_date, compile_filters, normalize_filters
    from plm_index.job import Job
    from plm_index.ranking import BEFORE, rescore, top_n
    from plm_index.remote import NO_REDIRECTS, RedirectRefused, bearer_key, scrub
    from plm_index.segments import Picked, Rows, SegmentedIndex, State
    from plm_index.sources import inside

# runtime module -> the names it gives the face, each imported on first use
_RUNTIME = {
    "plm_index.builds": (
        "SavedIndex", "build_matches", "build_path", "load_npy", "open_build", "save_build", "stage_folder",
    ),
    "plm_index.columns": (
        "IDS_FILE", "VECTORS_FILE", "load_ids", "load_vectors", "save_ids", "save_vectors", "take_ids",
    ),
    "plm_index.documents": (
        "MAX_METADATA_INT", "MissingFieldError", "check_document", "check_id", "document_from_record",
        "front_matter_lines", "merge_metadata_field", "record_id",
    ),
    "plm_index.filters": ("RANGE_OPS", "as_date", "compile_filters", "normalize_filters"),
    "plm_index.job": ("Job",),
    "plm_index.ranking": ("BEFORE", "rescore", "top_n"),
    "plm_index.remote": ("NO_REDIRECTS", "RedirectRefused", "bearer_key", "scrub"),
    "plm_index.segments": ("Picked", "Rows", "SegmentedIndex", "State"),
    "plm_index.sources": ("inside",),
}  # fmt: skip
_LAZY = {name: module for module, names in _RUNTIME.items() for name in names}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # found directly from now on: `plm.top_n` in a query path costs nothing
        return value
    if name == "testing":  # the conformance kit (plm/testing.py), for a plugin's own tests
        return importlib.import_module("plm.testing")
    raise AttributeError(f"module 'plm' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The face's names, those loaded on first use included (tab completion, `dir(plm)`)."""
    return sorted([*__all__, "testing"])


__all__ = [
    "BaseComponent",
    "BatchProcessor",
    "BatchResult",
    "Chunk",
    "ChunkTransform",
    "Chunker",
    "ComponentConfig",
    "Converted",
    "Converter",
    "ConfigError",
    "Corpus",
    "CorpusVersion",
    "Document",
    "EmbeddedQuery",
    "Embedder",
    "Evaluator",
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
    "ProcessorFactory",
    "Query",
    "QueryExpander",
    "QueryGenerator",
    "Ranking",
    "RankingStage",
    "Registry",
    "Reporter",
    "Reranker",
    "Retrieval",
    "Retriever",
    "ScoredChunk",
    "fused_ranking",
    "Settings",
    "Snapshot",
    "SourceScore",
    "StaleIndexError",
    "Store",
    "StoreError",
    "StoreProblem",
    "SyntheticQuery",
    "Tokenizer",
    "default_registry",
    "hookimpl",
    "load_settings",
    "require_embedder",
    # loaded on first use (_LAZY)
    "as_date",
    "bearer_key",
    "BEFORE",
    "build_matches",
    "build_path",
    "check_document",
    "check_id",
    "compile_filters",
    "document_from_record",
    "front_matter_lines",
    "IDS_FILE",
    "inside",
    "Job",
    "load_ids",
    "load_npy",
    "load_vectors",
    "MAX_METADATA_INT",
    "merge_metadata_field",
    "MissingFieldError",
    "NO_REDIRECTS",
    "normalize_filters",
    "open_build",
    "Picked",
    "RANGE_OPS",
    "record_id",
    "RedirectRefused",
    "rescore",
    "Rows",
    "save_build",
    "scrub",
    "save_ids",
    "save_vectors",
    "SavedIndex",
    "SegmentedIndex",
    "stage_folder",
    "State",
    "take_ids",
    "top_n",
    "VECTORS_FILE",
]
