"""`plm.testing.check_evaluator` and `check_reporter` pass stages written from the contracts
alone and fail, naming the rule, for ones broken in one way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import plm
import plm.testing


class FirstHit(plm.Evaluator):
    name = "kit_first_hit"

    def metric_names(self) -> list[str]:
        return ["Hit@1", "Found"]

    def evaluate(self, job: Any, qset: Any, progress: bool = False) -> dict[str, Any]:
        rows = []
        for qid, text in qset.queries.items():
            ranking, _ = job.search(plm.Query(text=text, k=3, id=qid))
            docs = [h.doc_id for h in ranking.hits]
            relevant = qset.qrels.get(qid, {})
            rows.append(
                {
                    "query_id": qid,
                    "Hit@1": float(bool(docs) and docs[0] in relevant),
                    "Found": float(any(d in relevant for d in docs)),
                }
            )
        means = {m: sum(r[m] for r in rows) / len(rows) if rows else 0.0 for m in self.metric_names()}
        return {"set": qset.name, "queries": len(rows), "metrics": means, "per_query": rows}


def test_an_evaluator_written_from_the_contract_passes() -> None:
    plm.testing.check_evaluator(FirstHit())


class SumsNotMeans(FirstHit):
    name = "kit_sums"

    def evaluate(self, job: Any, qset: Any, progress: bool = False) -> dict[str, Any]:
        report = super().evaluate(job, qset, progress)
        report["metrics"] = {m: sum(r[m] for r in report["per_query"]) for m in self.metric_names()}
        return report


class MetricsOutOfOrder(FirstHit):
    name = "kit_out_of_order"

    def evaluate(self, job: Any, qset: Any, progress: bool = False) -> dict[str, Any]:
        report = super().evaluate(job, qset, progress)
        report["metrics"] = dict(reversed(list(report["metrics"].items())))
        return report


class EmptySetFails(FirstHit):
    name = "kit_empty_fails"

    def evaluate(self, job: Any, qset: Any, progress: bool = False) -> dict[str, Any]:
        report = super().evaluate(job, qset, progress)
        report["metrics"] = {m: v / report["queries"] for m, v in report["metrics"].items()} | report["metrics"]
        return report


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (SumsNotMeans, r"each metric is the mean of its per_query values"),
        (MetricsOutOfOrder, r"`metrics` holds metric_names\(\), in order"),
        (EmptySetFails, r"an empty query set \(stopped by ZeroDivisionError"),
    ],
)
def test_a_broken_evaluator_fails_naming_the_contract(broken: type[FirstHit], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_evaluator(broken())
    assert str(err.value).startswith("evaluators contract (docs/contracts/evaluators.md)")


class MeanTable(plm.Reporter):
    name = "kit_mean_table"

    def compare(self, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        return {label: {s["set"]: dict(s["metrics"]) for s in run["sets"]} for label, run in runs}

    def write(self, comparison: Mapping[str, Any], out_dir: Any, top: int = 10, metric: str | None = None) -> dict:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "means.json"
        path.write_text(json.dumps(comparison))
        return {"means": path}


def test_a_reporter_written_from_the_contract_passes(tmp_path: Path) -> None:
    plm.testing.check_reporter(MeanTable())
    plm.testing.check_reporter(MeanTable(), folder=tmp_path / "report")


class ReversesTheRuns(MeanTable):
    name = "kit_reverses_runs"

    def compare(self, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        runs.reverse()  # type: ignore[attr-defined]
        return super().compare(runs)


class WritesBeside(MeanTable):
    name = "kit_writes_beside"

    def write(self, comparison: Mapping[str, Any], out_dir: Any, top: int = 10, metric: str | None = None) -> dict:
        files = super().write(comparison, out_dir, top, metric)
        return {**files, "missing": Path(out_dir) / "chart.png"}


class NotJson(MeanTable):
    name = "kit_not_json"

    def compare(self, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        return {"labels": {label for label, _ in runs}}


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (ReversesTheRuns, r"compare leaves the runs as they were"),
        (WritesBeside, r"each path write returns exists"),
        (NotJson, r"the comparison is JSON"),
    ],
)
def test_a_broken_reporter_fails_naming_the_contract(broken: type[MeanTable], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_reporter(broken())
    assert str(err.value).startswith("reporters contract (docs/contracts/reporters.md)")
