"""The built-in evaluator and reporter keep their contracts (`plm.testing.check_evaluator`
on the kit's job and judged queries, `plm.testing.check_reporter` on two configs' runs),
with their defaults and with the settings that change what they report."""

from __future__ import annotations

from pathlib import Path

import pytest

import plm
import plm.testing


def _stage(name: str, family: str, **config: object) -> object:
    return plm.default_registry().get(name, family).cls(**config)


@pytest.mark.parametrize("config", [{}, {"one_ranking": True}, {"chunk_k": 3, "doc_k": 10}])
def test_ir_metrics_keeps_the_evaluators_contract(config: dict[str, object]) -> None:
    plm.testing.check_evaluator(_stage("ir_metrics", "evaluators", **config))  # type: ignore[arg-type]


@pytest.mark.parametrize("config", [{"chart": False}, {"chart": False, "test": "ttest", "correction": "none"}])
def test_comparison_report_keeps_the_reporters_contract(config: dict[str, object], tmp_path: Path) -> None:
    reporter = _stage("comparison_report", "reporters", n_resamples=200, n_bootstrap=200, **config)
    plm.testing.check_reporter(reporter, folder=tmp_path / "report")  # type: ignore[arg-type]
