"""plm's kernel: records, components, pipelines, plugins, configs, contracts. Imports no ML
library and none of the index runtime (`plm_index`); plugin authors import `plm`."""

from typing import Any

from plm_core.component import BaseComponent, Component, ComponentConfig
from plm_core.errors import ConfigError, PipelineError, PlmUserError, PluginError, TypeValidationError
from plm_core.hookspecs import hookimpl
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


def __getattr__(name: str) -> Any:
    if name == "Job":  # the runtime's facade, loaded on first use only
        from plm_index.job import Job

        return Job
    raise AttributeError(f"module 'plm_core' has no attribute {name!r}")


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
