"""`plm eval` on the sample corpus with cheap BM25-only configs (no embedder, no spaCy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plm_core.config import load_job
from plm_core.settings import Settings
from plm_eval.eval_command import config_labels, eval_index_dirs, run_configs
from plm_index.plugins import default_registry

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "configs" / "experiments"
SAMPLE = REPO / "examples" / "sample_corpus"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def plm(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    # Not a terminal, 80 columns: the tables must come out whole all the same.
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(data_dir), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=180
    )


@pytest.fixture(scope="module")
def two_bm25(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("eval")
    res = plm(
        "eval",
        "--config",
        str(EXPERIMENTS / "bm25_whitespace.toml"),
        "--config",
        str(EXPERIMENTS / "bm25_stemmed.toml"),
        "--dataset",
        str(SAMPLE),
        "--queries",
        "test",
        "--out",
        str(tmp / "out"),
        "--per-query",
        "--top",
        "3",
        "--resamples",
        "1000",
        data_dir=tmp / "data",
    )
    return res, tmp / "out"


def test_eval_prints_side_by_side_table_with_deltas_and_p_values(two_bm25) -> None:  # type: ignore[no-untyped-def]
    res, _ = two_bm25
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    header = next(line for line in lines if "nDCG@10" in line and "config" in line)
    for metric in ("R@100", "RR@10", "Hit@1", "Hit@5", "MRR"):
        assert metric in header
    stemmed = next(i for i, line in enumerate(lines) if line.split()[:1] == ["bm25_stemmed"])
    # The cell under each metric: mean, then the delta vs the first config, then its p, the
    # Holm-corrected p and the 95% bootstrap interval of the delta.
    assert lines[stemmed + 1].split()[0][0] in "+-"
    assert lines[stemmed + 2].split()[0].startswith("p")
    assert lines[stemmed + 3].split()[0] == "Holm"
    assert lines[stemmed + 4].split()[0].startswith("[")
    assert "delta vs bm25_whitespace" in res.stdout and "permutation" in res.stdout
    assert "Holm-corrected p" in res.stdout and "95% bootstrap CI" in res.stdout
    assert "survive (Holm, p<0.05): " in res.stdout


def test_eval_writes_json_csv_markdown_and_png(two_bm25) -> None:  # type: ignore[no-untyped-def]
    res, out = two_bm25
    assert res.returncode == 0, res.stderr[-3000:]
    for name in ("summary.json", "per_query.json", "per_query.csv", "report.md", "metrics.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "metrics.png").read_bytes()[:8] == PNG_SIGNATURE
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["sets"][0]["rows"]
    assert [r["config"] for r in rows] == ["bm25_whitespace", "bm25_stemmed"]
    assert rows[1]["delta"]["nDCG@10"] == pytest.approx(rows[1]["values"]["nDCG@10"] - rows[0]["values"]["nDCG@10"])
    assert all(0 <= p <= 1 for p in rows[1]["p"].values())
    # One config compared with the baseline: Holm leaves its p-values as they are.
    assert rows[1]["p_corrected"] == rows[1]["p"]
    # The interval is of the mean per-query difference (per-query values are rounded to 6
    # places), the delta a difference of the aggregates: they agree to well under 1e-5.
    for m, (low, high) in rows[1]["ci"].items():
        assert low - 1e-5 <= rows[1]["delta"][m] <= high + 1e-5, m
    assert summary["test"]["correction"] == "holm" and summary["test"]["bootstrap"]["n_resamples"] == 10000
    per_query = json.loads((out / "per_query.json").read_text())["test"]
    assert len(per_query) == 30 and set(per_query[0]["configs"]) == {"bm25_whitespace", "bm25_stemmed"}
    assert len((out / "per_query.csv").read_text().strip().splitlines()) == 1 + 30 * 2
    md = (out / "report.md").read_text()
    assert "| `bm25_stemmed` |" in md and "Ingest and cache reuse" in md
    assert "Holm's correction" in md and "95% CI [" in md and "that survive (Holm's correction" in md
    # what made it: plm's version, the command, each config file's hash
    made = summary["provenance"]
    assert made["command"].startswith("plm eval --config ") and "--per-query" in made["command"]
    assert made["plm"] and made["overrides"] == []
    assert len(made["configs"]["bm25_stemmed"]["sha256"]) == 64 and f"Made by `{made['command']}`" in md


def test_eval_writes_run_files_that_give_the_reports_numbers(two_bm25) -> None:  # type: ignore[no-untyped-def]
    # trec_eval-style tools read the runs and get the report's doc measures, exactly
    ir_measures = pytest.importorskip("ir_measures")
    _, out = two_bm25
    summary = json.loads((out / "summary.json").read_text())
    qrels = [
        ir_measures.Qrel(q, d, int(g))
        for q, d, g in (line.split("\t") for line in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:])
    ]
    for row in summary["sets"][0]["rows"]:
        run = out / "runs" / "test" / f"{row['config']}.trec"
        lines = run.read_text().splitlines()
        assert {line.split()[0] for line in lines} == {f"q{i:02d}" for i in range(1, 31)}
        assert all(line.split()[5] == row["config"] for line in lines)
        got = ir_measures.calc_aggregate(
            [ir_measures.parse_measure("nDCG@10")], qrels, ir_measures.read_trec_run(str(run))
        )
        assert list(got.values())[0] == pytest.approx(row["values"]["nDCG@10"], abs=1e-12)


def test_eval_per_query_shows_where_configs_differ(two_bm25) -> None:  # type: ignore[no-untyped-def]
    res, out = two_bm25
    assert "queries where bm25_whitespace and bm25_stemmed differ most by nDCG@10" in res.stdout
    assert "doc rank" in res.stdout and "chunk rank" in res.stdout
    per_query = json.loads((out / "per_query.json").read_text())["test"]
    differing = [
        q for q in per_query if q["configs"]["bm25_whitespace"]["nDCG@10"] != q["configs"]["bm25_stemmed"]["nDCG@10"]
    ]
    top = max(
        differing,
        key=lambda q: abs(q["configs"]["bm25_stemmed"]["nDCG@10"] - q["configs"]["bm25_whitespace"]["nDCG@10"]),
    )
    assert " ".join(top["query"].split()[:4]) in " ".join(res.stdout.split())


def test_per_query_needs_two_configs(tmp_path: Path) -> None:
    res = plm("eval", "--config", str(EXPERIMENTS / "bm25_whitespace.toml"), "--per-query", data_dir=tmp_path)
    assert res.returncode == 2 and "at least two --config" in res.stderr and "Traceback" not in res.stderr


def test_unknown_correction_is_refused_before_any_work(tmp_path: Path) -> None:
    res = plm("eval", "--config", str(EXPERIMENTS / "bm25_whitespace.toml"), "--correction", "fdr", data_dir=tmp_path)
    assert res.returncode == 2 and "'holm', 'bonferroni' or 'none'" in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing ingested


def test_an_unknown_metric_or_test_is_refused_before_any_work(tmp_path: Path) -> None:
    config = str(EXPERIMENTS / "bm25_whitespace.toml")
    res = plm("eval", "--config", config, "--metric", "nDCG@11", data_dir=tmp_path)
    assert res.returncode == 2 and "unknown --metric 'nDCG@11'; choose one of Hit@1, Hit@5, MRR, nDCG@10" in res.stderr
    res = plm("eval", "--config", config, "--test", "test", data_dir=tmp_path)
    assert res.returncode == 2 and "--test 'test': the significance test is permutation or ttest" in res.stderr
    bad = 'job.evaluator={ use = "ir_metrics", measures = ["nDCG@10", "MAPP"] }'
    res = plm("eval", "--config", config, "--set", bad, data_dir=tmp_path)
    assert res.returncode == 2 and "[job] evaluator" in res.stderr and "'MAPP' is not an ir-measures name" in res.stderr
    assert "Traceback" not in res.stderr and list(tmp_path.iterdir()) == []  # nothing ingested


def test_two_searches_that_rank_differently_are_said_and_one_ranking_scores_one(tmp_path: Path) -> None:
    # DBSF normalises over the candidates, which grow with k: the chunk view's search at 5 and
    # the doc view's at 100 rank differently; `one_ranking` takes both views from the second
    text = (EXPERIMENTS / "bm25_stemmed.toml").read_text()
    text = text.replace('dataset = "../../examples/sample_corpus"', f'dataset = "{SAMPLE}"')
    text = text.replace('order = ["bm25"]', 'order = ["bm25", "plain"]').replace('use = "rrf"', 'use = "linear"')
    text = text.replace("weights = { bm25 = 1.0 }", "weights = { bm25 = 1.0, plain = 1.0 }")
    text = text.replace("k = 60\n", 'normalization = "dbsf"\n').replace("k = 10\n", 'normalization = "dbsf"\n')
    text = text.replace(
        "[query.retrieve.fuser]\n",
        '[query.retrieve.retrievers.plain]\nuse = "bm25s"\ntokenizer = "whitespace_lower"\n\n[query.retrieve.fuser]\n',
    )
    config = tmp_path / "dbsf.toml"
    config.write_text(text)
    common = ("eval", "--config", str(config), "--out", "OUT", "--resamples", "100", "--bootstrap", "100")
    res = plm(*[str(tmp_path / "two") if a == "OUT" else a for a in common], data_dir=tmp_path / "data")
    assert res.returncode == 0, res.stderr[-2000:]
    differ = json.loads((tmp_path / "two" / "summary.json").read_text())["sets"][0]["rankings_differ"]["dbsf"]
    assert differ > 0
    assert f"ranked the top chunks differently for some of the 30 queries (dbsf {differ})" in " ".join(
        res.stdout.split()
    )
    assert 'evaluator = { use = "ir_metrics", one_ranking = true }' in " ".join(res.stdout.split())
    one = 'job.evaluator={ use = "ir_metrics", one_ranking = true }'
    res = plm(*[str(tmp_path / "one") if a == "OUT" else a for a in common], "--set", one, data_dir=tmp_path / "data")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "differently" not in res.stdout
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert summary["sets"][0]["rankings_differ"]["dbsf"] == 0
    # one ranking: a relevant doc is never lower in the doc ranking than its chunk in the top 5
    rows = json.loads((tmp_path / "one" / "per_query.json").read_text())["test"]
    assert all(r["configs"]["dbsf"]["MRR"] <= r["configs"]["dbsf"]["RR@10"] + 1e-12 for r in rows)


def test_config_without_dataset_asks_for_one(tmp_path: Path) -> None:
    res = plm("eval", "--config", str(REPO / "configs" / "scifact" / "bm25_stemmed.toml"), data_dir=tmp_path)
    assert res.returncode == 2 and "--dataset" in res.stderr and "Traceback" not in res.stderr


def _with_yake(tmp_path: Path, name: str, tokenizer: str) -> Path:
    """A BM25-only sample config plus a YAKE keywords stage (the work the two share)."""
    text = (EXPERIMENTS / "bm25_whitespace.toml").read_text()
    text = text.replace('dataset = "../../examples/sample_corpus"', f'dataset = "{SAMPLE}"')
    text = text.replace('name = "exp_bm25_whitespace"', f'name = "{name}"')
    text = text.replace('tokenizer = "whitespace_lower"', f'tokenizer = "{tokenizer}"')
    text = text.replace("[query.expand]", '[index.keywords]\nuse = "yake"\n\n[query.expand]')
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_second_config_reuses_shared_stage_from_cache(tmp_path: Path) -> None:
    configs = [_with_yake(tmp_path, "yake_ws", "whitespace_lower"), _with_yake(tmp_path, "yake_stem", "bm25s_stem")]
    settings = Settings(data_dir=str(tmp_path / "data"), progress=False)
    runs = run_configs(configs, query_sets=["test"], settings=settings)
    first, second = (r["ingest"] for _, r in runs)
    chunks = first["chunks"]
    assert first["work"]["keywords"] == {"computed": chunks, "cached": 0}
    assert second["work"]["keywords"] == {"computed": 0, "cached": chunks}
    assert runs[0][1]["index_dir"] != runs[1][1]["index_dir"]
    # Run again: both indexes are unchanged, so nothing is ingested at all.
    again = run_configs(configs, query_sets=["test"], settings=settings)
    assert all(r["ingest"]["skipped"] for _, r in again)


def test_same_job_name_in_two_files_gets_two_index_folders(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    src = (EXPERIMENTS / "bm25_whitespace.toml").read_text()
    paths = [a / "x.toml", b / "x.toml", a / "y.toml"]
    for p in paths:
        p.write_text(src)
    configs = [load_job(p, default_registry()) for p in paths]
    dirs = eval_index_dirs(configs, str(tmp_path / "data"), SAMPLE)
    assert len(set(dirs)) == 3
    assert dirs[2].name == "exp_bm25_whitespace.y-sample_corpus"
    assert config_labels(paths) == ["a/x", "b/x", "y"]


def _sample_with(tmp_path: Path, qrels: str) -> Path:
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "docs").symlink_to(SAMPLE / "docs")
    (ds / "queries.jsonl").write_text((SAMPLE / "queries.jsonl").read_text())
    (ds / "qrels").mkdir()
    (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return ds


def test_an_existing_file_as_out_is_refused_before_any_work(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine")
    cfg = str(EXPERIMENTS / "bm25_whitespace.toml")
    res = plm("eval", "--config", cfg, "--dataset", str(SAMPLE), "--out", str(taken), data_dir=tmp_path / "data")
    assert res.returncode == 2 and f"--out {taken} is a file" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "data").exists() and taken.read_text() == "mine"  # nothing ingested, nothing written


def test_a_query_set_without_judged_queries_is_an_error_not_zeros(tmp_path: Path) -> None:
    ds = _sample_with(tmp_path, "no-such-query\tquickstart\t1\n")
    cfg = str(EXPERIMENTS / "bm25_whitespace.toml")
    res = plm("eval", "--config", cfg, "--dataset", str(ds), "--out", str(tmp_path / "o"), data_dir=tmp_path / "data")
    assert res.returncode == 2 and "no judged queries" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "o").exists()


def test_the_table_is_whole_when_stdout_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `plm eval ... > log` or in the background: rich takes 80 columns there and cut the
    # columns past them (the p-values and MRR were lost).
    from plm_eval.eval_command import print_comparison

    monkeypatch.setenv("COLUMNS", "80")
    metrics = ["nDCG@10", "R@100", "RR@10", "Hit@1", "Hit@5", "MRR", "P@10"]
    labels = ["bm25_whitespace_baseline", "bm25_stemmed_variant", "hybrid_recommended_recipe"]
    rows = [
        {
            "config": label,
            "values": {m: 0.5 + i / 10 for m in metrics},
            "delta": {m: (None if i == 0 else i / 10) for m in metrics},
            "p": {m: 0.0123 * i for m in metrics},
            "p_corrected": {m: 0.0246 * i for m in metrics},
            "significant": {m: i == 2 for m in metrics},
            "ci": {m: (None if i == 0 else (0.01, 0.2)) for m in metrics},
        }
        for i, label in enumerate(labels)
    ]
    comparison = {
        "test": {"name": "permutation", "alpha": 0.05, "correction": "holm"},
        "baseline": labels[0],
        "configs": [{"label": label} for label in labels],
        "sets": [{"set": "test", "queries": 30, "metrics": metrics, "rows": rows}],
    }
    print_comparison(comparison)
    shown = capsys.readouterr().out
    assert "…" not in shown, shown
    header = next(line for line in shown.splitlines() if "config" in line and "nDCG@10" in line)
    for metric in metrics:
        assert metric in header.split(), (metric, header)
    for label in labels:
        assert label in shown
    # every cell whole: raw p, Holm-corrected p (starred when it survives) and the interval
    assert shown.count("p=0.012") == shown.count("Holm p=0.025") == shown.count("Holm p=0.049*") == len(metrics)
    assert shown.count("[+.010,+.200]") == 2 * len(metrics)


def test_a_reused_out_folder_holds_the_new_report_alone(two_bm25, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    _, first = two_bm25
    out = tmp_path / "out"
    shutil.copytree(first, out)
    assert (out / "metrics.png").exists() and (out / "runs" / "test" / "bm25_stemmed.trec").exists()
    config = str(EXPERIMENTS / "bm25_whitespace.toml")
    res = plm(
        "eval", "--config", config, "--out", str(out), "--no-chart", "--resamples", "100", data_dir=tmp_path / "d"
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert not (out / "metrics.png").exists()  # the earlier report's chart, of other configs
    assert sorted(p.name for p in (out / "runs" / "test").iterdir()) == ["bm25_whitespace.trec"]


def test_without_matplotlib_the_report_is_written_and_the_chart_said_missing(tmp_path: Path) -> None:
    """Issue 45 E15: with matplotlib missing, `plm eval` did all the work, wrote every other
    file, then exited 2; the chart is the only thing it cannot make, so it says so."""
    stub = tmp_path / "stub" / "matplotlib"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('matplotlib is not installed (a test stub)')\n")
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(tmp_path / "stub")}  # fmt: skip
    cmd = [sys.executable, "-m", "plm_index.cli", "eval", "--config", str(EXPERIMENTS / "bm25_whitespace.toml"),
           "--dataset", str(SAMPLE), "--queries", "test", "--out", str(tmp_path / "out")]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "note: no metrics.png: the chart needs matplotlib (pip install 'plm[eval]')" in res.stdout
    assert (tmp_path / "out" / "report.md").is_file() and not (tmp_path / "out" / "metrics.png").exists()
