"""plm's kernel: records, components, pipelines, plugins, configs, contracts. Imports no ML
library and none of the index runtime (`plm_index`). Plugin authors import `plm`, which
gathers what a stage needs from these modules."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "Job":  # the runtime's facade, loaded on first use only
        from plm_index.job import Job

        return Job
    raise AttributeError(f"module 'plm_core' has no attribute {name!r}")
