"""plm core: records, components, pipelines, plugins, configs. Imports no ML library."""

from plm_core.component import BaseComponent, Component, ComponentConfig
from plm_core.errors import ConfigError, PipelineError, PlmUserError, PluginError, TypeValidationError
from plm_core.hookspecs import hookimpl
from plm_core.job import Job
from plm_core.pipeline import Pipeline
from plm_core.records import (
    Chunk,
    Document,
    EmbeddedQuery,
    ExpandedQuery,
    FusionConfig,
    Hit,
    PipelineResult,
    Query,
    RewrittenQuery,
    ScoredChunk,
)

__version__ = "0.1.0"

__all__ = [
    "BaseComponent",
    "Chunk",
    "Component",
    "ComponentConfig",
    "ConfigError",
    "Document",
    "EmbeddedQuery",
    "ExpandedQuery",
    "FusionConfig",
    "Hit",
    "Job",
    "Pipeline",
    "PipelineError",
    "PipelineResult",
    "PlmUserError",
    "PluginError",
    "Query",
    "RewrittenQuery",
    "ScoredChunk",
    "TypeValidationError",
    "hookimpl",
]
