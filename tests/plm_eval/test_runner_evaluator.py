"""`[job] evaluator` takes an evaluator only (issue 47: `evaluator = "comparison_report"`, a
reporter, was accepted and failed later with an AttributeError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plm_core.config import load_job
from plm_core.errors import PluginError
from plm_eval.runner import evaluator_for
from plm_index.plugins import default_registry

POC = Path(__file__).resolve().parents[2] / "configs" / "poc_parity.toml"


def test_a_reporter_named_as_the_evaluator_is_refused_before_any_work(tmp_path: Path) -> None:
    config = tmp_path / "job.toml"
    config.write_text(POC.read_text().replace("[job]\n", '[job]\nevaluator = "comparison_report"\n', 1))
    job = load_job(config, default_registry())
    with pytest.raises(PluginError, match=r"\[job\] evaluator: unknown evaluators component 'comparison_report'"):
        evaluator_for(job, default_registry())
    assert type(evaluator_for(load_job(POC, default_registry()), default_registry())).__name__ == "IRMetricsEvaluator"
