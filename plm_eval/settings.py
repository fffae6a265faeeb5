"""The keys evaluation adds to a recipe's `[job]` table (what `plm run` and `plm eval` score
a recipe on), registered with the kernel's registry so a misspelt key is still an error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from plm_core.config import JobConfig


class EvalSettings(BaseModel):
    """`[job]` keys for evaluation: the dataset, its query sets, the evaluator and the reporter."""

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = None
    """A BEIR-layout folder (corpus, queries, qrels) to evaluate on, relative to the config; `--dataset` overrides."""
    corpus: list[str] = ["corpus.jsonl"]
    """What the loader reads inside the dataset: the first of these that exists."""
    queries: list[str] = Field(["test"], min_length=1)
    """The dataset's query sets to evaluate (`--queries` overrides)."""
    report_dir: str = "reports"
    """Where `plm run` writes its reports, relative to the working directory."""
    evaluator: str | dict[str, Any] = "ir_metrics"
    """The evaluator `plm run` and `plm eval` score query sets with: a registered name, or a
    table with its settings, `{ use = "ir_metrics", measures = ["nDCG@10", "AP"], one_ranking = true }`."""
    reporter: str = "comparison_report"
    """What `plm eval` compares configs with (a registered name)."""


def eval_settings(config: JobConfig) -> EvalSettings:
    """A loaded config's evaluation keys (its `[job]` table read again where the registry
    that loaded it had no evaluation settings, e.g. one built by hand in a test)."""
    if isinstance(config.job, EvalSettings):
        return config.job
    raw = config.raw.get("job", {})
    return EvalSettings.model_validate({k: v for k, v in raw.items() if k in EvalSettings.model_fields})
