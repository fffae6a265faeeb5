"""`plm tune`: the search arithmetic, the TOML writer, and the command end to end on the
sample corpus with cheap BM25-only trials (no embedder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plm_core.config import load_job, tomllib
from plm_core.errors import ConfigError
from plm_core.settings import Settings
from plm_eval import tuning
from plm_eval.eval_command import run_configs
from plm_index.plugins import default_registry

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample_corpus"
CONFIG = REPO / "configs" / "experiments" / "bm25_stemmed.toml"
K1 = "query.retrieve.retrievers.bm25.k1"
TOKENIZER = "query.retrieve.retrievers.bm25.tokenizer"


def plm(*args: str, data_dir: Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(data_dir), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


# ------------------------------------------------------------------ arithmetic
def test_values_split_at_top_level_commas_only() -> None:
    assert tuning.split_values('1, 2.5,"a,b",[1,2],{ dense = 1, bm25 = 2 }') == [
        "1",
        "2.5",
        '"a,b"',
        "[1,2]",
        "{ dense = 1, bm25 = 2 }",
    ]


@pytest.mark.parametrize("arg", ["k=", "=1,2", "k", "k=1,1", "k=[1,2"])
def test_bad_params_are_config_errors(arg: str) -> None:
    with pytest.raises(ConfigError):
        tuning.parse_param(arg)


def test_grid_is_every_combination_and_random_draws_distinct_ones() -> None:
    params = [tuning.parse_param("a=1,2,3"), tuning.parse_param("b=x,y")]
    grid = tuning.trials(params)
    assert len(grid) == 6 and len({tuple(t.items()) for t in grid}) == 6
    assert grid[0] == {"a": "1", "b": "x"} and grid[-1] == {"a": "3", "b": "y"}
    drawn = tuning.trials(params, "random", 4, seed=1)
    assert len(drawn) == 4 and all(t in grid for t in drawn) and len({tuple(t.items()) for t in drawn}) == 4
    assert drawn == tuning.trials(params, "random", 4, seed=1)  # seeded
    assert len(tuning.trials(params, "random", 99)) == 6
    with pytest.raises(ConfigError):
        tuning.trials(params, "random")
    with pytest.raises(ConfigError):
        tuning.trials([tuning.parse_param("a=1"), tuning.parse_param("a=2")])


def test_a_grid_past_the_bound_is_refused_before_it_is_built() -> None:
    params = [tuning.parse_param(f"p{i}=" + ",".join(map(str, range(30)))) for i in range(3)]  # 27,000
    with pytest.raises(ConfigError, match=r"27,000 combinations.*10,000.*--search random --trials N"):
        tuning.trials(params)
    huge = [tuning.parse_param(f"p{i}=" + ",".join(map(str, range(10)))) for i in range(12)]  # 10**12
    with pytest.raises(ConfigError, match="1,000,000,000,000 combinations"):
        tuning.trials(huge)
    drawn = tuning.trials(huge, "random", 5, seed=3)  # sampled without building the grid
    assert len(drawn) == 5 and len({tuple(t.items()) for t in drawn}) == 5
    with pytest.raises(ConfigError, match="--trials 20,000.*10,000"):
        tuning.trials(huge, "random", 20_000)


def test_folds_partition_the_queries() -> None:
    qids = [f"q{i}" for i in range(11)]
    parts = tuning.folds(qids, 3, seed=2)
    assert sorted(q for p in parts for q in p) == sorted(qids) and sorted(len(p) for p in parts) == [3, 4, 4]
    with pytest.raises(ConfigError):
        tuning.folds(qids, 1)


def test_best_and_cross_validation_choose_on_training_folds_only() -> None:
    # Trial 0 is best on q1..q3, trial 1 only on q0: each fold's pick depends on its training part.
    per_trial = [{"q0": 0.0, "q1": 1.0, "q2": 1.0, "q3": 1.0}, {"q0": 1.0, "q1": 0.9, "q2": 0.9, "q3": 0.9}]
    assert tuning.best(per_trial, ["q0", "q1", "q2", "q3"]) == 1  # 0.925 > 0.75
    assert tuning.best(per_trial, ["q1"]) == 0
    assert tuning.best([{"q": 0.5}, {"q": 0.5}], ["q"]) == 0  # ties: the earlier trial
    cv = tuning.cross_validate(per_trial, [["q0"], ["q1"], ["q2"], ["q3"]])
    # Holding out q0, trial 0 wins on q1..q3 (1.0 > 0.9) and scores 0 on q0; the others pick trial 1.
    assert [f["trial"] for f in cv["folds"]] == [0, 1, 1, 1]
    assert cv["held_out"] == pytest.approx((0.0 + 0.9 * 3) / 4)


def test_dump_toml_round_trips_every_shipped_config() -> None:
    for path in sorted((REPO / "configs").rglob("*.toml")):
        raw = tomllib.loads(path.read_text())
        text = tuning.dump_toml(raw, header="tuned\nsecond line")
        assert text.startswith("# tuned\n# second line\n")
        assert tomllib.loads(text) == raw, path


# ------------------------------------------------------------------ the command
@pytest.fixture(scope="module")
def split_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample corpus with its 30 judged queries split in two sets: tune and held."""
    ds = tmp_path_factory.mktemp("ds")
    (ds / "docs").symlink_to(SAMPLE / "docs")
    (ds / "queries.jsonl").write_text((SAMPLE / "queries.jsonl").read_text())
    rows = [r for r in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:] if r.strip()]
    qids = sorted({r.split("\t")[0] for r in rows})
    tune_ids = set(qids[::2])
    (ds / "qrels").mkdir()
    head = "query-id\tcorpus-id\tscore\n"
    (ds / "qrels" / "tune.tsv").write_text(head + "\n".join(r for r in rows if r.split("\t")[0] in tune_ids) + "\n")
    (ds / "qrels" / "held.tsv").write_text(head + "\n".join(r for r in rows if r.split("\t")[0] not in tune_ids) + "\n")
    return ds


def _means(ds: Path, data_dir: Path, trials: list[dict[str, str]], qset: str) -> list[float]:
    """Each trial evaluated independently by `plm eval`'s own runner (not through tune)."""
    registry, settings = default_registry(), Settings(data_dir=str(data_dir), progress=False)
    out = []
    for trial in trials:
        runs = run_configs([CONFIG], ds, None, [qset], tuning.overrides_of(trial), settings=settings, registry=registry)
        out.append(runs[0][1]["sets"][0]["metrics"]["nDCG@10"])
    return out


def test_tune_picks_the_best_trial_writes_a_loadable_config_and_tests_it(split_sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere" / "tuned.toml"
    res = plm(
        "tune",
        "--config",
        str(CONFIG),
        "--dataset",
        str(split_sample),
        "--queries",
        "tune",
        "--test",
        "held",
        "--param",
        f"{K1}=0.05,1.5",
        "--param",
        f"{TOKENIZER}=whitespace_lower,bm25s_stem",
        "--out",
        str(out),
        data_dir=tmp_path / "data",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((out.parent / "tune.json").read_text())
    trials = [t["params"] for t in report["trials"]]
    assert len(trials) == 4
    expected = _means(split_sample, tmp_path / "data2", trials, "tune")
    # Per-query scores are reported to 6 decimals, so means agree to about 1e-6.
    assert [t["nDCG@10"] for t in report["trials"]] == pytest.approx(expected, abs=2e-6)
    assert max(expected) - min(expected) > 0.01  # the trials really differ, so the choice means something
    winner = min(i for i in range(4) if expected[i] >= max(expected) - 2e-6)  # ties: the earlier trial
    assert report["winner"]["trial"] == winner
    # the margin over the best other trial, with a paired test: a win within noise says so
    second = max((i for i in range(4) if i != winner), key=lambda i: (expected[i], -i))
    runner_up = report["runner_up"]
    assert runner_up["trial"] == second and runner_up["delta"] == pytest.approx(
        expected[winner] - expected[second], abs=4e-6
    )
    assert 0 <= runner_up["p"] <= 1 and f"winner vs runner-up (trial {second + 1}): " in res.stdout
    # The tuned config carries the winner's values, keeps every other key, and loads from
    # another folder (its dataset path was rewritten relative to it).
    cfg = load_job(out, default_registry())
    bm25 = cfg.raw["query"]["retrieve"]["retrievers"]["bm25"]
    assert (str(bm25["k1"]), bm25["tokenizer"]) == (trials[winner][K1], trials[winner][TOKENIZER])
    original = tomllib.loads(CONFIG.read_text())
    assert cfg.raw["index"] == original["index"] and cfg.raw["query"]["expand"] == original["query"]["expand"]
    assert (out.parent / cfg.raw["job"]["dataset"]).resolve() == SAMPLE.resolve()
    assert out.read_text().startswith("# Tuned by `plm tune`")
    # The held-out comparison: original vs tuned, on the set the tuning never saw.
    assert "query set held" in res.stdout and set(report["test"]["held"]) == {"original", "tuned"}
    held = _means(split_sample, tmp_path / "data2", [{}, trials[winner]], "held")
    assert report["test"]["held"]["tuned"]["nDCG@10"] == pytest.approx(held[1], abs=1e-6)
    assert report["test"]["held"]["original"]["nDCG@10"] == pytest.approx(held[0], abs=1e-6)


def test_tune_with_folds_reports_a_cross_validated_estimate(split_sample: Path, tmp_path: Path) -> None:
    res = plm(
        "tune",
        "-c",
        str(CONFIG),
        "--dataset",
        str(split_sample),
        "--queries",
        "tune",
        "-p",
        f"{K1}=0.05,0.5,1.5",
        "--search",
        "random",
        "--trials",
        "2",
        "--folds",
        "3",
        "--out",
        str(tmp_path / "t.toml"),
        data_dir=tmp_path / "data",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "tune.json").read_text())
    assert len(report["trials"]) == 2 and len(report["cross_validation"]["folds"]) == 3
    assert "3-fold cross-validation" in res.stdout
    per_fold = report["cross_validation"]["folds"]
    assert sum(f["queries"] for f in per_fold) == 15  # the 15 judged queries of the tune set


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--param", "query.retrieve.retrievers.bm25.k_one=1,2"], "k_one"),
        (["--param", f"{K1}=1,2", "--test", "tune"], "is the tuning set"),
        (["--param", f"{K1}=1,2", "--search", "random"], "--trials"),
        ([arg for i in range(7) for arg in ("--param", f"query.p{i}=" + ",".join("0123456789"))], "10,000,000"),
        (["--param", f"{K1}=1,2", "--out", "/tmp"], "--out /tmp is a folder"),
        (["--param", f"{K1}=1,2", "--out", "/dev/null/x/tuned.toml"], "--out /dev/null/x/tuned.toml: /dev/null is"),
        (["--param", f"{K1}=1,2", "--out", "/tmp/no-such-run/tune1"], "give a name ending in .toml"),
        (["--param", f"{K1}=1,2", "--metric", "ndcg@10"], "unknown --metric 'ndcg@10'; choose one of Hit@1"),
    ],
)
def test_bad_requests_fail_before_any_work(tmp_path: Path, split_sample: Path, extra: list[str], message: str) -> None:
    res = plm("tune", "-c", str(CONFIG), "--dataset", str(split_sample), "--queries", "tune", *extra, data_dir=tmp_path)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not any(tmp_path.iterdir())  # nothing ingested
