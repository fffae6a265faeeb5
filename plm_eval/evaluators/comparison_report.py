"""Side-by-side comparison of several configs' evaluation runs on the same query sets.

Input: what `plm_eval.runner.run_job` returns per config (its `sets[*].per_query` rows carry
every metric per query, named like the aggregates). Output: one table row per config and
metric with the delta vs the first config, a paired significance test over the queries, the
p-value after a multiple-testing correction and a paired bootstrap confidence interval of the
delta (`significance`); the queries where two configs differ most; and files (JSON, CSV,
Markdown, PNG) written by `report_writers`. scipy and matplotlib are imported only when used.

The correction's family is one query set and one metric: the p-values of every config
against the baseline there (m = configs - 1), as PyTerrier's `Experiment(correction=...)`
corrects each measure's p-value column across the systems. Not across metrics: nDCG@10,
RR@10 and MRR are views of the same rankings, strongly correlated, and a family over them
would make a verdict depend on how many measures the evaluator happens to print. Not across
query sets: each set is its own experiment (a tuning set, a test set), and adding one must
not change another's verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from plm.evaluation import Reporter
from plm_core.component import ComponentConfig
from plm_core.errors import MissingDependencyError, PlmUserError
from plm_core.hookspecs import hookimpl
from plm_eval.evaluators.significance import CONFIDENCE, adjust_p_values, bootstrap_cis, paired_p_value

__all__ = ["ComparisonReporter", "paired_p_value", "per_query_values"]

if TYPE_CHECKING:
    from plm_core.registry import Registry

# Per-query fields kept for the side-by-side views (the rest of a row is config-specific).
QUERY_FIELDS = ("query_id", "query", "relevant")
RUN_FIELDS = ("rank", "doc_rank", "expanded", "fired", "docs")


def per_query_values(set_result: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """{metric: {query id: value}} for every aggregate metric of one evaluated query set."""
    out: dict[str, dict[str, float]] = {}
    for metric in set_result["metrics"]:
        values: dict[str, float] = {}
        for row in set_result["per_query"]:
            if metric not in row:
                raise PlmUserError(
                    f"per-query rows lack {metric!r}: the evaluator is older than this reporter; re-run the evaluation"
                )
            values[str(row["query_id"])] = float(row[metric])
        out[metric] = values
    return out


class ComparisonReporter(Reporter):
    """Compares evaluation runs of several configs: deltas, p-values (raw and corrected), bootstrap
    intervals and report files."""

    name = "comparison_report"

    class Config(ComponentConfig):
        test: Literal["permutation", "ttest"] = "permutation"
        """The paired significance test of each config against the first, over the queries:
        "permutation" (paired randomisation, two-sided) or "ttest" (paired t-test)."""
        n_resamples: int = Field(10000, ge=100)
        """Resamples (random swaps within each query's pair) of the permutation test, >= 100;
        more gives steadier p-values, slower. Ignored by "ttest"."""
        seed: int = 0
        """Random seed of the permutation test and the bootstrap, so p-values and intervals
        repeat from run to run."""
        chart: bool = True
        """true: also write metrics.png, bars per metric and config, one panel per query set
        (needs matplotlib)."""
        alpha: float = Field(0.05, gt=0, lt=1)
        """Significance level (between 0 and 1): a corrected p-value below it marks the
        difference significant (it survives the correction)."""
        correction: Literal["holm", "bonferroni", "none"] = "holm"
        """Multiple-testing correction of the p-values of the configs compared with the
        baseline, per query set and metric: "holm" (step-down, controls the family-wise
        error rate, never less powerful than Bonferroni), "bonferroni" (p x m, capped at 1)
        or "none"."""
        n_bootstrap: int = Field(10000, ge=100)
        """Resamples of the paired bootstrap (queries drawn with replacement) that gives each
        delta its 95% percentile confidence interval, >= 100; seeded by `seed`."""

    config: Config

    def compare(self, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        """(label, run_job report) per config, baseline first -> the comparison (JSON-ready)."""
        if not runs:
            raise PlmUserError("nothing to compare: no evaluation runs")
        base_label, base = runs[0]
        set_names = [s["set"] for s in base["sets"]]
        for label, run in runs[1:]:
            if [s["set"] for s in run["sets"]] != set_names:
                raise PlmUserError(
                    f"{label} was evaluated on query sets {[s['set'] for s in run['sets']]}, "
                    f"{base_label} on {set_names}; compare runs over the same sets"
                )
        sets = [
            self._compare_set(name, [(label, run["sets"][i]) for label, run in runs])
            for i, name in enumerate(set_names)
        ]
        return {
            "baseline": base_label,
            "test": {
                "name": self.config.test,
                "n_resamples": self.config.n_resamples,
                "seed": self.config.seed,
                "alpha": self.config.alpha,
                "paired_over": "queries",
                "two_sided": True,
                "correction": self.config.correction,
                "correction_family": "per query set and metric: the configs compared with the baseline",
                "bootstrap": {
                    "n_resamples": self.config.n_bootstrap,
                    "seed": self.config.seed,
                    "confidence": CONFIDENCE,
                    "method": "paired percentile bootstrap: queries drawn with replacement",
                },
            },
            "configs": [_config_summary(label, run) for label, run in runs],
            "sets": sets,
        }

    def _compare_set(self, name: str, results: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        base_label, base = results[0]
        # Doc-ranking measures (nDCG@10 first) lead; the chunk view's Hit@k and MRR follow.
        metrics = sorted(base["metrics"], key=lambda m: m.startswith("Hit@") or m == "MRR")
        values = {label: per_query_values(res) for label, res in results}
        qids = [str(r["query_id"]) for r in base["per_query"]]
        rows = []
        diffs: list[list[float]] = []  # one column per (compared config, metric), for the bootstrap
        for i, (label, res) in enumerate(results):
            if sorted(values[label][metrics[0]]) != sorted(qids):
                raise PlmUserError(f"{label} and {base_label} were scored on different queries of set {name!r}")
            row: dict[str, Any] = {
                "config": label,
                "values": {},
                "delta": {},
                "p": {},
                "p_corrected": {},
                "significant": {},
                "ci": {},
            }
            for m in metrics:
                row["values"][m] = float(res["metrics"][m])
                if i == 0:
                    for key in ("delta", "p", "p_corrected", "significant", "ci"):
                        row[key][m] = None
                    continue
                row["delta"][m] = row["values"][m] - float(base["metrics"][m])
                a = [values[label][m][q] for q in qids]
                b = [values[base_label][m][q] for q in qids]
                row["p"][m] = paired_p_value(a, b, self.config.test, self.config.n_resamples, self.config.seed)
                diffs.append([x - y for x, y in zip(a, b, strict=True)])
            rows.append(row)
        self._correct_and_bound(rows[1:], metrics, diffs)
        per_query = []
        by_label = {label: {str(r["query_id"]): r for r in res["per_query"]} for label, res in results}
        for r in base["per_query"]:
            qid = str(r["query_id"])
            entry: dict[str, Any] = {f: r.get(f) for f in QUERY_FIELDS}
            entry["configs"] = {
                label: {**{f: rows_[qid].get(f) for f in RUN_FIELDS}, **{m: values[label][m][qid] for m in metrics}}
                for label, rows_ in by_label.items()
            }
            per_query.append(entry)
        return {
            "set": name,
            "queries": len(qids),
            "metrics": metrics,
            "rows": rows,
            # per config: queries whose chunk view came from another ranking than the doc view's
            "rankings_differ": {label: res.get("rankings_differ") for label, res in results},
            "per_query": per_query,
            "runs": {label: res["run"] for label, res in results if res.get("run") is not None},
        }

    def _correct_and_bound(
        self, rows: Sequence[dict[str, Any]], metrics: Sequence[str], diffs: list[list[float]]
    ) -> None:
        """Fill the compared rows' corrected p-values, verdicts and bootstrap intervals.

        `diffs` holds the per-query differences row by row, metric by metric."""
        import numpy as np

        if not rows:
            return
        for m in metrics:
            corrected = adjust_p_values([row["p"][m] for row in rows], self.config.correction)
            for row, p in zip(rows, corrected, strict=True):
                row["p_corrected"][m] = p
                row["significant"][m] = p < self.config.alpha
        bounds = bootstrap_cis(np.asarray(diffs, dtype=float).T, self.config.n_bootstrap, self.config.seed)
        for j, (row, m) in enumerate((row, m) for row in rows for m in metrics):
            row["ci"][m] = [float(bounds[j, 0]), float(bounds[j, 1])]

    def differing_queries(
        self, set_cmp: Mapping[str, Any], a: str, b: str, metric: str | None = None, top: int = 10
    ) -> list[dict[str, Any]]:
        """The `top` queries whose `metric` differs most between configs a and b, largest first."""
        metric = metric or set_cmp["metrics"][0]
        if metric not in set_cmp["metrics"]:
            raise PlmUserError(f"unknown metric {metric!r}; choose one of {', '.join(set_cmp['metrics'])}")
        out = []
        for entry in set_cmp["per_query"]:
            va, vb = entry["configs"][a], entry["configs"][b]
            diff = vb[metric] - va[metric]
            if abs(diff) > 1e-12:
                out.append(
                    {
                        **{f: entry[f] for f in QUERY_FIELDS},
                        "metric": metric,
                        "diff": diff,
                        "a": {"config": a, **va},
                        "b": {"config": b, **vb},
                    }
                )
        # Ties on the main metric: the chunk-view reciprocal rank decides, then query order.
        out.sort(key=lambda d: (-abs(d["diff"]), -abs(d["b"].get("MRR", 0) - d["a"].get("MRR", 0))))
        return out[:top]

    def write(
        self, comparison: Mapping[str, Any], out_dir: Path, top: int = 10, metric: str | None = None
    ) -> dict[str, Path]:
        """Write summary.json, per_query.json, per_query.csv, report.md, metrics.png and the runs
        (runs/<set>/<config>.trec: each query's doc ranking, as trec_eval and ranx read it)."""
        from plm_eval.evaluators import report_writers as rw

        out_dir.mkdir(parents=True, exist_ok=True)
        # A reused folder holds this report alone: a chart or run file of an earlier one goes.
        for old in [out_dir / "metrics.png", *(out_dir / "runs").glob("*/*.trec")]:
            old.unlink(missing_ok=True)
        diffs = self._first_pair_diffs(comparison, top, metric)
        files = {
            "summary": rw.write_summary_json(comparison, out_dir / "summary.json"),
            "per_query_json": rw.write_per_query_json(comparison, out_dir / "per_query.json"),
            "per_query_csv": rw.write_per_query_csv(comparison, out_dir / "per_query.csv"),
            "markdown": rw.write_markdown(comparison, diffs, out_dir / "report.md"),
        }
        runs = rw.write_runs(comparison, out_dir / "runs")
        if runs:
            files["runs"] = runs
        if self.config.chart:
            try:
                files["chart"] = rw.write_chart(comparison, out_dir / "metrics.png")
            except MissingDependencyError:  # the report is whole without its picture: the caller says so
                pass
        return files

    def _first_pair_diffs(
        self, comparison: Mapping[str, Any], top: int, metric: str | None
    ) -> dict[str, list[dict[str, Any]]]:
        labels = [c["label"] for c in comparison["configs"]]
        if len(labels) < 2:
            return {}
        return {s["set"]: self.differing_queries(s, labels[0], labels[1], metric, top) for s in comparison["sets"]}


def _config_summary(label: str, run: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("job", "config", "dataset", "corpus", "index_dir", "model", "model_skipped", "ingest")
    return {"label": label, **{k: run.get(k) for k in keys}}


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(ComparisonReporter)
