"""The comparison reporter: paired tests, deltas, differing queries and report files."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from plm_eval.evaluators.comparison_report import ComparisonReporter, paired_p_value, per_query_values
from plm_eval.evaluators.significance import bootstrap_ci

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _run(per_query: dict[str, dict[str, Any]], ingest_work: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run_job-shaped report over one query set: per-query metric values as given."""
    rows = [{"query_id": q, "query": f"text of {q}", "relevant": ["d1"], "docs": [], **v} for q, v in per_query.items()]
    metrics = {m: sum(r[m] for r in rows) / len(rows) for m in ("Hit@1", "MRR", "nDCG@10")}
    return {
        "job": "j",
        "config": "c.toml",
        "dataset": "/data/x",
        "corpus": "/data/x/corpus.jsonl",
        "model": None,
        "ingest": {
            "documents": 3,
            "chunks": 3,
            "skipped": False,
            "wall_s": 0.1,
            "work": ingest_work or {"keywords": {"computed": 3, "cached": 0}},
        },
        "sets": [{"set": "test", "queries": len(rows), "metrics": metrics, "per_query": rows}],
    }


def _q(hit1: float, mrr: float, ndcg: float, rank: int | None = None, doc_rank: int | None = None) -> dict[str, Any]:
    return {"Hit@1": hit1, "MRR": mrr, "nDCG@10": ndcg, "rank": rank, "doc_rank": doc_rank}


BASE = _run({"q1": _q(1, 1.0, 1.0, 1, 1), "q2": _q(0, 0.5, 0.6, 2, 2), "q3": _q(0, 0.0, 0.0, None, 40)})
OTHER = _run(
    {"q1": _q(1, 1.0, 1.0, 1, 1), "q2": _q(1, 1.0, 1.0, 1, 1), "q3": _q(0, 0.25, 0.3, 4, 5)},
    {"keywords": {"computed": 0, "cached": 3}},
)


def test_identical_scores_give_p_one() -> None:
    a = [0.1, 0.5, 0.9, 0.0, 1.0]
    assert paired_p_value(a, list(a), "permutation", 1000) == 1.0
    assert paired_p_value(a, list(a), "ttest") == 1.0


def test_large_consistent_difference_gives_small_p() -> None:
    base = [0.1 + 0.01 * i for i in range(30)]
    better = [b + 0.5 + 0.001 * (i % 3) for i, b in enumerate(base)]
    # 30 queries all improving: the smallest p a 2,000-resample test can give (2 / 2,001).
    assert paired_p_value(better, base, "permutation", 2000, seed=1) < 0.002
    assert paired_p_value(better, base, "ttest") < 1e-10


def test_noise_is_not_significant() -> None:
    a = [0.0, 1.0] * 10
    b = [1.0, 0.0] * 10  # as many queries lose as win
    assert paired_p_value(a, b, "permutation", 2000) > 0.5
    assert paired_p_value(a, b, "ttest") > 0.5


def test_permutation_p_is_reproducible_with_a_seed() -> None:
    a, b = [0.2, 0.9, 0.4, 0.8, 0.7, 0.6], [0.1, 0.5, 0.5, 0.3, 0.6, 0.6]
    assert paired_p_value(a, b, "permutation", 500, seed=3) == paired_p_value(a, b, "permutation", 500, seed=3)


def test_per_query_values_by_metric() -> None:
    values = per_query_values(BASE["sets"][0])
    assert values["MRR"] == {"q1": 1.0, "q2": 0.5, "q3": 0.0}


def test_compare_hand_computed_deltas_and_baseline_row() -> None:
    cmp = ComparisonReporter(n_resamples=1000).compare([("base", BASE), ("other", OTHER)])
    (s,) = cmp["sets"]
    assert s["metrics"] == ["nDCG@10", "Hit@1", "MRR"]  # doc measures first, chunk view after
    base_row, other_row = s["rows"]
    assert base_row["delta"] == {"nDCG@10": None, "Hit@1": None, "MRR": None}
    assert base_row["values"]["nDCG@10"] == pytest.approx(1.6 / 3)
    # nDCG@10: (1 + 1 + 0.3)/3 - (1 + 0.6 + 0)/3 = 0.7/3; Hit@1: 2/3 - 1/3; MRR: 2.25/3 - 1.5/3
    assert other_row["delta"]["nDCG@10"] == pytest.approx(0.7 / 3)
    assert other_row["delta"]["Hit@1"] == pytest.approx(1 / 3)
    assert other_row["delta"]["MRR"] == pytest.approx(0.25)
    assert all(0 < p <= 1 for p in other_row["p"].values())
    # Three queries, so scipy runs the exact test over the 2^3 sign flips of the nDCG
    # differences (0, 0.4, 0.3): 2 of 8 reach the observed mean, doubled (two-sided): 0.5.
    assert other_row["p"]["nDCG@10"] == pytest.approx(0.5)
    assert cmp["baseline"] == "base" and [c["label"] for c in cmp["configs"]] == ["base", "other"]
    assert cmp["configs"][1]["ingest"]["work"] == {"keywords": {"computed": 0, "cached": 3}}


def test_compare_config_against_itself_is_p_one() -> None:
    cmp = ComparisonReporter(n_resamples=100).compare([("a", BASE), ("a#2", BASE)])
    row = cmp["sets"][0]["rows"][1]
    assert set(row["p"].values()) == {1.0} and set(row["delta"].values()) == {0.0}


def test_differing_queries_largest_first_and_equal_ones_left_out() -> None:
    reporter = ComparisonReporter(n_resamples=100)
    s = reporter.compare([("base", BASE), ("other", OTHER)])["sets"][0]
    diffs = reporter.differing_queries(s, "base", "other", "nDCG@10", top=5)
    assert [d["query_id"] for d in diffs] == ["q2", "q3"]  # q1 equal; q2 +0.4, q3 +0.3
    assert diffs[0]["diff"] == pytest.approx(0.4)
    assert (diffs[0]["a"]["doc_rank"], diffs[0]["b"]["doc_rank"]) == (2, 1)
    assert (diffs[1]["a"]["rank"], diffs[1]["b"]["rank"]) == (None, 4)
    assert reporter.differing_queries(s, "base", "other", "nDCG@10", top=1)[0]["query_id"] == "q2"


def test_different_query_sets_are_refused() -> None:
    other = json.loads(json.dumps(OTHER))
    other["sets"][0]["set"] = "dev"
    with pytest.raises(Exception, match="same sets"):
        ComparisonReporter().compare([("base", BASE), ("other", other)])


def test_write_produces_every_file(tmp_path: Path) -> None:
    reporter = ComparisonReporter(n_resamples=100)
    files = reporter.write(reporter.compare([("base", BASE), ("other", OTHER)]), tmp_path / "out")
    assert set(files) == {"summary", "per_query_json", "per_query_csv", "markdown", "chart"}
    assert all(p.stat().st_size > 0 for p in files.values())
    assert files["chart"].read_bytes()[:8] == PNG_SIGNATURE
    summary = json.loads(files["summary"].read_text())
    assert summary["sets"][0]["rows"][1]["delta"]["Hit@1"] == pytest.approx(1 / 3)
    assert "per_query" not in summary["sets"][0]
    with files["per_query_csv"].open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 and rows[0]["config"] == "base" and rows[0]["nDCG@10"] == "1.0"
    assert rows[4]["chunk_rank"] == "" and rows[4]["doc_rank"] == "40"  # q3 under base
    row = summary["sets"][0]["rows"][1]
    assert row["p_corrected"]["nDCG@10"] == row["p"]["nDCG@10"]  # one config compared: Holm changes nothing
    assert row["significant"] == {"nDCG@10": False, "Hit@1": False, "MRR": False}
    assert row["ci"]["nDCG@10"][0] <= row["delta"]["nDCG@10"] <= row["ci"]["nDCG@10"][1]
    assert summary["test"]["correction"] == "holm" and summary["test"]["bootstrap"]["confidence"] == 0.95
    md = files["markdown"].read_text()
    assert "| `other` | 0.767 (+0.233, p=" in md
    low, high = row["ci"]["nDCG@10"]
    assert f"Holm p={row['p_corrected']['nDCG@10']:.3f}, 95% CI [{low:+.3f}, {high:+.3f}])" in md
    assert "after Holm's correction" in md and "Correction family: per query set and metric" in md
    assert "Differences vs `base` that survive (Holm's correction, p < 0.05): none." in md
    assert "keywords 0 computed / 3 cached" in md
    assert "differ most" in md


def test_chart_can_be_turned_off(tmp_path: Path) -> None:
    reporter = ComparisonReporter(n_resamples=100, chart=False)
    files = reporter.write(reporter.compare([("base", BASE)]), tmp_path)
    assert "chart" not in files and not (tmp_path / "metrics.png").exists()


def test_config_is_validated() -> None:
    with pytest.raises(ValidationError):
        ComparisonReporter(n_resamples=10)
    with pytest.raises(ValidationError):
        ComparisonReporter(test="wilcoxon")
    with pytest.raises(ValidationError):
        ComparisonReporter(correction="fdr_bh")
    with pytest.raises(ValidationError):
        ComparisonReporter(n_bootstrap=10)


# Three configs over 20 queries against one baseline: `strong` wins 19 queries by 0.2,
# `weak` and `weak2` win 16 by 0.2 and lose 4 by 0.3 (paired t-test p ~ 0.042 each);
# Hit@1 and MRR are the baseline's everywhere.
_NDCG = [0.3 + 0.02 * (i % 10) for i in range(20)]


def _shifted(diffs: list[float]) -> dict[str, Any]:
    return _run({f"q{i}": _q(0, 0.5, n + d) for i, (n, d) in enumerate(zip(_NDCG, diffs, strict=True))})


FAMILY = [
    ("base", _shifted([0.0] * 20)),
    ("strong", _shifted([0.2] * 19 + [-0.2])),
    ("weak", _shifted([0.2] * 16 + [-0.3] * 4)),
    ("weak2", _shifted([0.2] * 16 + [-0.3] * 4)),
]


def test_holm_corrects_each_metric_across_the_configs() -> None:
    cmp = ComparisonReporter(test="ttest").compare(FAMILY)
    rows = {r["config"]: r for r in cmp["sets"][0]["rows"]}
    p = {c: rows[c]["p"]["nDCG@10"] for c in ("strong", "weak", "weak2")}
    assert p["strong"] < 1e-6 and 0.025 < p["weak"] == p["weak2"] < 0.05
    # Holm over m = 3: the smallest x3, the tied pair x2 then x1, lifted to x2 by the running max.
    corrected = {c: rows[c]["p_corrected"]["nDCG@10"] for c in p}
    assert corrected == pytest.approx({"strong": 3 * p["strong"], "weak": 2 * p["weak"], "weak2": 2 * p["weak"]})
    # weak is significant before the correction, not after; strong survives it.
    assert {c: rows[c]["significant"]["nDCG@10"] for c in p} == {"strong": True, "weak": False, "weak2": False}
    # Each metric is its own family: identical Hit@1 and MRR give p = 1 whatever nDCG@10 did.
    assert rows["weak"]["p_corrected"]["Hit@1"] == 1.0 and rows["weak"]["ci"]["MRR"] == [0.0, 0.0]
    assert rows["base"]["p_corrected"]["nDCG@10"] is None and rows["base"]["ci"]["nDCG@10"] is None
    assert cmp["test"]["correction"] == "holm"


def test_bonferroni_and_no_correction() -> None:
    bonf = ComparisonReporter(test="ttest", correction="bonferroni").compare(FAMILY)["sets"][0]["rows"]
    p_strong, p_weak = bonf[1]["p"]["nDCG@10"], bonf[2]["p"]["nDCG@10"]
    assert [r["p_corrected"]["nDCG@10"] for r in bonf[1:]] == pytest.approx([3 * p_strong, 3 * p_weak, 3 * p_weak])
    none = ComparisonReporter(test="ttest", correction="none").compare(FAMILY)["sets"][0]["rows"]
    assert [r["p_corrected"]["nDCG@10"] for r in none[1:]] == [p_strong, p_weak, p_weak]
    assert [r["significant"]["nDCG@10"] for r in none[1:]] == [True, True, True]


def test_each_delta_gets_its_paired_bootstrap_interval() -> None:
    cmp = ComparisonReporter(test="ttest", n_bootstrap=2000, seed=4).compare(FAMILY)
    rows = {r["config"]: r for r in cmp["sets"][0]["rows"]}
    base = [_NDCG[i] for i in range(20)]
    weak = [n + d for n, d in zip(_NDCG, [0.2] * 16 + [-0.3] * 4, strict=True)]
    # The same interval as the one-pair function with the same seed: the reporter pairs by query.
    assert rows["weak"]["ci"]["nDCG@10"] == pytest.approx(bootstrap_ci(weak, base, 2000, seed=4), abs=1e-12)
    low, high = rows["strong"]["ci"]["nDCG@10"]
    assert 0 < low <= rows["strong"]["delta"]["nDCG@10"] <= high <= 0.2 + 1e-9
    assert cmp["test"]["bootstrap"] == {
        "n_resamples": 2000,
        "seed": 4,
        "confidence": 0.95,
        "method": "paired percentile bootstrap: queries drawn with replacement",
    }
    again = ComparisonReporter(test="ttest", n_bootstrap=2000, seed=4).compare(FAMILY)
    assert again["sets"][0]["rows"] == cmp["sets"][0]["rows"]


def test_report_marks_only_the_differences_that_survive(tmp_path: Path) -> None:
    reporter = ComparisonReporter(test="ttest", chart=False)
    md = reporter.write(reporter.compare(FAMILY), tmp_path)["markdown"].read_text()
    strong = next(line for line in md.splitlines() if line.startswith("| `strong` |"))
    weak = next(line for line in md.splitlines() if line.startswith("| `weak` |"))
    assert "Holm p<0.001\\*, 95% CI [" in strong
    assert "p=0.042, Holm p=0.084, 95% CI [" in weak and "\\*" not in weak
    assert "survive (Holm's correction, p < 0.05): strong nDCG@10 +0.180." in md
    assert "the 3 config(s) compared with `base`" in md
    plain = ComparisonReporter(test="ttest", correction="none", chart=False)
    md = plain.write(plain.compare(FAMILY), tmp_path / "none")["markdown"].read_text()
    weak = next(line for line in md.splitlines() if line.startswith("| `weak` |"))
    assert "(+0.100, p=0.042\\*, 95% CI [" in weak and "Holm" not in md
    assert "not corrected for multiple comparisons" in md
    assert "survive (p < 0.05, uncorrected): strong nDCG@10 +0.180; weak nDCG@10 +0.100; weak2 nDCG@10 +0.100." in md


def test_registered_as_reporter() -> None:
    from plm_index.plugins import default_registry

    assert default_registry().get("comparison_report", "reporters").cls is ComparisonReporter
