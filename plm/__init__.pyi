# ruff: noqa: I001 - grouped by what a name is for, not sorted
# The face of plm: every name a stage author or a library user needs, in one declared list.
# `plm/__init__.py` reads this file to load each name on first use; type checkers and
# editors read it as the package's types. Runtime internals live in named submodules:
# `plm.indexes` (segments, build folders, column files), `plm.documents` (a loader's record
# checks), `plm.filters` (a store's own filter language), `plm.remote` (a key and its
# redirects), `plm.models` (the model locator), `plm.chat` (an LLM endpoint), `plm.synthetic`
# (the rules of a synthetic query), `plm.testing` (the conformance kit).

# --- Contracts: the base class of each family (a stage's family is its base's) ---
from plm_core.component import BaseComponent as BaseComponent
from plm_core.component import ComponentConfig as ComponentConfig
from plm.evaluation import Evaluator as Evaluator
from plm.evaluation import QueryGenerator as QueryGenerator
from plm.evaluation import Reporter as Reporter
from plm_core.interfaces import Chunker as Chunker
from plm_core.interfaces import ChunkTransform as ChunkTransform
from plm_core.interfaces import Converter as Converter
from plm_core.interfaces import Embedder as Embedder
from plm_core.interfaces import Executor as Executor
from plm_core.interfaces import Fuser as Fuser
from plm_core.interfaces import Index as Index
from plm_core.interfaces import Loader as Loader
from plm_core.interfaces import QueryExpander as QueryExpander
from plm_core.interfaces import RankingStage as RankingStage
from plm_core.interfaces import Reranker as Reranker
from plm_core.interfaces import Retrieval as Retrieval
from plm_core.interfaces import Retriever as Retriever
from plm_core.interfaces import Store as Store
from plm_core.interfaces import Tokenizer as Tokenizer
from plm_index.builds import SavedIndex as SavedIndex
from plm_index.segments import SegmentedIndex as SegmentedIndex

# --- Records: what stages take and give ---
from plm_core.records import BatchResult as BatchResult
from plm_core.records import Chunk as Chunk
from plm_core.records import Converted as Converted
from plm_core.records import CorpusVersion as CorpusVersion
from plm_core.records import Document as Document
from plm_core.records import EmbeddedQuery as EmbeddedQuery
from plm_core.records import ExpandedQuery as ExpandedQuery
from plm_core.records import FusionConfig as FusionConfig
from plm_core.records import Hit as Hit
from plm_core.records import LoadFailure as LoadFailure
from plm_core.records import Query as Query
from plm_core.records import Ranking as Ranking
from plm_core.records import ScoredChunk as ScoredChunk
from plm_core.records import SourceScore as SourceScore
from plm_core.records import StoreProblem as StoreProblem
from plm.evaluation import SyntheticQuery as SyntheticQuery

# --- What the runtime hands a stage (`needs`), and a plugin's registration ---
from plm_core.hookspecs import hookimpl as hookimpl
from plm_core.interfaces import BatchProcessor as BatchProcessor
from plm_core.interfaces import ProcessorFactory as ProcessorFactory
from plm_core.protocols import Corpus as Corpus
from plm_core.protocols import Snapshot as Snapshot
from plm_core.registry import Registry as Registry
from plm_index.plugins import default_registry as default_registry
from plm_core.settings import Settings as Settings
from plm_core.settings import load_settings as load_settings

# --- Errors ---
from plm_core.errors import ConfigError as ConfigError
from plm_core.errors import IndexDamagedError as IndexDamagedError
from plm_core.errors import MissingDependencyError as MissingDependencyError
from plm_core.errors import ModelNotFoundError as ModelNotFoundError
from plm_core.errors import PlmUserError as PlmUserError
from plm_core.errors import PluginError as PluginError
from plm_core.errors import StaleIndexError as StaleIndexError
from plm_core.errors import StoreError as StoreError

# --- Helpers for authors ---
from plm_core.interfaces import require_embedder as require_embedder
from plm_index.documents import document_from_record as document_from_record
from plm_index.filters import compile_filters as compile_filters
from plm_index.ranking import fused_ranking as fused_ranking
from plm_index.ranking import BEFORE as BEFORE
from plm_index.ranking import rescore as rescore
from plm_index.ranking import top_n as top_n

# --- The library API ---
from plm_index.job import Job as Job

# --- Named submodules ---
from plm import chat as chat
from plm import documents as documents
from plm import filters as filters
from plm import indexes as indexes
from plm import languages as languages
from plm import models as models
from plm import remote as remote
from plm import synthetic as synthetic
from plm import testing as testing
