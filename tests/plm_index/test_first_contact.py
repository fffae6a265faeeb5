"""First contact and bad input: usage errors, bad settings, bad queries, damaged, locked and
read-only indexes, containment. Each class of defect is one test; each runs the real CLI
or the real Job over a small BM25-only index (no model)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from plm_needs import needs

from plm_core.errors import PlmUserError, StoreError
from plm_core.settings import Settings
from plm_index.job import Job

REPO = Path(__file__).resolve().parents[2]
pytestmark = needs("bm25s", extra="bm25")

CONFIG = """
[job]
name = "first_contact"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
tokenizer = "bm25s_stem"
method = "lucene"
"""
TOPICS = ["backup restore schedule", "token rotation policy", "pod scheduling on nodes", "disk quota per tenant"]


def plm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args], capture_output=True, text=True, env=full, cwd=REPO, timeout=180
    )


def one_error(res: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The command failed with `code`, one `error:` paragraph and no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout[-500:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr
    return " ".join(res.stderr.split())


@pytest.fixture()
def setup(tmp_path: Path) -> dict[str, Any]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(TOPICS):
        (docs / f"doc{i}.md").write_text(f"# {topic.title()}\n\nThis page covers {topic}. " * 3)
    config = tmp_path / "job.toml"
    config.write_text(CONFIG)
    index = tmp_path / "index"
    job = Job.from_config(config, index_dir=index, settings=Settings(progress=False, data_dir=str(tmp_path / "data")))
    job.ingest([docs])
    job.close()
    return {"docs": docs, "config": config, "index": index, "tmp": tmp_path, "job": job}


# ------------------------------------------------------------------ usage errors
@pytest.mark.parametrize(
    "args",
    [[], ["query", "RPO"], ["qurey"], ["plugins", "bm25s"], ["query", "RPO", "-c", "X", "-k", "abc"]],
    ids=["no-args", "missing-config", "typo", "extra-arg", "bad-k"],
)
def test_usage_errors_are_short_and_exit_2(args: list[str]) -> None:
    res = plm(*args)
    assert res.returncode == 2 and "Traceback" not in res.stderr + res.stdout
    assert "Usage: plm" in res.stdout + res.stderr


def test_version() -> None:
    res = plm("--version")
    assert res.returncode == 0 and res.stdout.startswith("plm ")


def test_usage_errors_under_the_oldest_typer_the_pin_admits() -> None:
    """CI installs the oldest typer the pin admits beside the current one (.ci/run)."""
    oldest = Path(os.environ.get("PLM_TYPER_OLDEST", REPO / ".ci" / "typer-oldest"))
    if not (oldest / "typer").is_dir():
        pytest.skip(f"the oldest typer is not installed at {oldest} (.ci/run installs it)")
    env = {"PYTHONPATH": str(oldest)}
    probe = subprocess.run(
        [sys.executable, "-c", "import typer; print(typer.__version__)"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    pins = [line for line in (REPO / "pyproject.toml").read_text().splitlines() if '"typer>=' in line]
    assert pins and probe.stdout.strip() == pins[0].split(">=")[1].split('"')[0], (probe.stdout, pins)
    for args in (["qurey"], ["query", "RPO"], ["query", "RPO", "-c", "X", "-k", "abc"]):
        res = plm(*args, env=env)
        assert res.returncode == 2 and "Traceback" not in res.stderr and "Error" in res.stderr, res.stderr
    assert plm("plugins", env=env).returncode == 0


# ------------------------------------------------------------------ settings and paths
def test_bad_environment_settings_are_one_error(setup: dict[str, Any]) -> None:
    msg = one_error(plm("query", "backup", "-c", str(setup["config"]), env={"PLM_INGEST_BATCH": "abc"}))
    assert "PLM_INGEST_BATCH='abc'" in msg
    res = plm(
        "query", "backup", "-c", str(setup["config"]), "--index", str(setup["index"]), env={"PLM_LOG_LEVEL": "debug"}
    )
    assert res.returncode == 0, res.stderr


def test_index_or_data_dir_pointing_at_a_file(setup: dict[str, Any]) -> None:
    afile = setup["tmp"] / "afile"
    afile.write_text("x")
    assert "is a file" in one_error(plm("query", "backup", "-c", str(setup["config"]), "--index", str(afile)))
    msg = one_error(plm("ingest", str(setup["docs"]), "-c", str(setup["config"]), env={"PLM_DATA_DIR": str(afile)}))
    assert "cannot create the index folder" in msg


def test_read_commands_never_create_an_index(setup: dict[str, Any]) -> None:
    new = setup["tmp"] / "nothing" / "deep"
    assert "no index at" in one_error(plm("query", "backup", "-c", str(setup["config"]), "--index", str(new)))
    assert "no index at" in one_error(plm("index", "stats", "-c", str(setup["config"]), "--index", str(new)))
    assert not (setup["tmp"] / "nothing").exists()


@pytest.mark.parametrize(
    "table, value, expected",
    [("job", 'name = "../../x"', "name"), ("store", 'use = "sqlite"\nfilename = "../../s.sqlite"', "filename")],
)
def test_index_paths_stay_inside_the_data_folder(setup: dict[str, Any], table: str, value: str, expected: str) -> None:
    config = setup["tmp"] / "escape.toml"
    text = CONFIG.replace('[job]\nname = "first_contact"', "") if table == "job" else CONFIG
    config.write_text(f"[{table}]\n{value}\n{text}")
    assert expected in one_error(plm("config", "check", str(config)))


@pytest.mark.parametrize(
    "content, expected",
    [(b'[job]\nname = "\xff"\n', "not UTF-8"), (b"x = " + b"[" * 5000 + b"]" * 5000, "malformed TOML")],
    ids=["not-utf8", "deep-arrays"],
)
def test_unreadable_configs_are_one_error(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    assert expected in one_error(plm("config", "check", str(path)))


def test_empty_trigger_and_absurd_fuser_k_fail_config_check(tmp_path: Path) -> None:
    (tmp_path / "dict.toml").write_text('"" = "every query"\nrpo = "recovery"\n')
    base = CONFIG.replace('[query.retrieve]\nuse = "bm25s"\ntokenizer = "bm25s_stem"\nmethod = "lucene"\n', "")
    expander = base + '[query.expand]\nuse = "dictionary"\ndictionary = "dict.toml"\n[query.retrieve]\nuse = "bm25s"\n'
    (tmp_path / "a.toml").write_text(expander)
    assert "empty trigger" in one_error(plm("config", "check", str(tmp_path / "a.toml")))
    for k in ("inf", "1e-300"):
        fuser = base + (
            '[query.retrieve]\nuse = "hybrid"\n[query.retrieve.retrievers.bm25]\nuse = "bm25s"\n'
            '[query.retrieve.fuser]\nuse = "rrf"\norder = ["bm25"]\n'
            f"default = {{ k = {k}, weights = {{ bm25 = 1.0 }} }}\n"
            "expanded = { weights = { bm25 = 1.0 } }\n"
        )
        (tmp_path / "b.toml").write_text(fuser)
        assert "default.k" in one_error(plm("config", "check", str(tmp_path / "b.toml")))


# ------------------------------------------------------------------ queries
@pytest.mark.parametrize(
    "text, k",
    [
        ("", 5),
        ("   \n", 5),
        (None, 5),
        ("RPO \ud800", 5),
        ("backup", 0),
        ("backup", -1),
        ("backup", True),
        ("backup", math.nan),
        ("backup", "5"),
        ("backup", 10**9),
    ],
)
def test_bad_queries_are_one_clear_error(setup: dict[str, Any], text: Any, k: Any) -> None:
    job = Job.from_config(setup["config"], index_dir=setup["index"], settings=Settings(progress=False, cache=False))
    with pytest.raises(PlmUserError) as info:
        job.retrieve(text, k=k)
    assert not isinstance(info.value, StoreError) and len(str(info.value).splitlines()) == 1


def test_a_query_matching_nothing_says_no_match(setup: dict[str, Any]) -> None:
    job = Job.from_config(setup["config"], index_dir=setup["index"], settings=Settings(progress=False, cache=False))
    assert job.retrieve("zebra", k=3) == [] and job.retrieve("the of and", k=3) == []
    hits = job.retrieve("token rotation", k=3)
    assert [h.rank for h in hits] == [1] and hits[0].doc_id == "doc1"  # ranks count from 1; no zero-score filler
    res = plm("query", "zebra", "-c", str(setup["config"]), "--index", str(setup["index"]))
    assert res.returncode == 0 and "no match" in res.stdout
    res = plm("query", "RPO \udcff", "-c", str(setup["config"]), "--index", str(setup["index"]))  # invalid UTF-8 argv
    assert "not valid Unicode" in one_error(res)


# ------------------------------------------------------------------ damaged, locked, read-only
def test_garbage_in_the_database_is_detected_and_explained(setup: dict[str, Any]) -> None:
    db = setup["index"] / "plm.sqlite"
    data = bytearray(db.read_bytes())
    for page in range(1, len(data) // 4096):  # keep page 0 (the header), trash every other page
        data[page * 4096 + 100 : page * 4096 + 4000] = os.urandom(3900)
    db.write_bytes(bytes(data))
    for wal in setup["index"].glob("plm.sqlite-*"):
        wal.unlink()
    args = ["-c", str(setup["config"]), "--index", str(setup["index"])]
    assert "damaged" in one_error(plm("query", "backup", *args))
    res = plm("index", "stats", *args)
    # Listed among the problems, or (when opening the store already reads a damaged page)
    # the same one-line explanation.
    assert "Traceback" not in res.stderr
    assert (res.returncode == 1 and "problems: none" not in res.stdout) or (
        res.returncode == 2 and "damaged" in res.stderr
    ), res.stdout + res.stderr


def test_a_lock_held_too_long_is_one_line_naming_the_setting(setup: dict[str, Any]) -> None:
    other = sqlite3.connect(setup["index"] / "plm.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        (setup["docs"] / "doc0.md").write_text("# Changed\n\nA new text about backups. " * 3)
        args = ["ingest", str(setup["docs"]), "-c", str(setup["config"]), "--index", str(setup["index"])]
        msg = one_error(plm(*args, "--set", "store.busy_timeout_ms=200"))
        assert "locked by another writer" in msg and "busy_timeout_ms" in msg
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_read_only_index_can_be_queried(setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # Root may write anywhere, so the read-only mount is what os.access reports.
    real = os.access
    index = str(setup["index"])
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).startswith(index) else real(p, mode))
    job = Job.from_config(setup["config"], index_dir=setup["index"], settings=Settings(progress=False, cache=False))
    assert job.retrieve("token rotation", k=1)[0].doc_id == "doc1"
    assert job.store.read_only  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match="read-only"):
        job.delete(["doc1"])


def test_a_corrupt_cache_degrades_to_no_cache(setup: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    data = setup["tmp"] / "data2"
    data.mkdir()
    (data / "cache.sqlite").write_bytes(os.urandom(8192))
    config = setup["tmp"] / "cached.toml"  # YAKE keywords go through the content cache
    config.write_text(CONFIG.replace("[query.retrieve]", '[index.keywords]\nuse = "yake"\n[query.retrieve]'))
    index = setup["tmp"] / "index2"
    job = Job.from_config(config, index_dir=index, settings=Settings(progress=False, data_dir=str(data)))
    with caplog.at_level("WARNING"):
        report = job.ingest([setup["docs"]])
    assert len(report.added) == len(TOPICS) and job.retrieve("token rotation", k=1)[0].doc_id == "doc1"
    assert "continuing without it" in caplog.text


def test_a_broken_build_file_map_is_a_store_error(setup: dict[str, Any]) -> None:
    meta = next(setup["index"].glob("bm25s-*/segments/*/plm_segment.json"))
    data = json.loads(meta.read_text())
    data["files"] = {"x": "nonsense"}
    meta.write_text(json.dumps(data))
    assert "corrupt" in one_error(plm("query", "backup", "-c", str(setup["config"]), "--index", str(setup["index"])))


# ------------------------------------------------------------------ other sources
def test_an_ingest_into_an_index_holding_other_sources_says_so(setup: dict[str, Any]) -> None:
    more = setup["tmp"] / "more"
    more.mkdir()
    (more / "extra.md").write_text("# Extra\n\nSomething about billing and invoices. " * 3)
    res = plm("ingest", str(more), "-c", str(setup["config"]), "--index", str(setup["index"]))
    assert res.returncode == 0 and f"also holds {len(TOPICS)} document(s) from other sources" in res.stderr


def test_index_stats_json_and_a_json_title_shown(setup: dict[str, Any]) -> None:
    res = plm("index", "stats", "--json", "-c", str(setup["config"]), "--index", str(setup["index"]))
    assert res.returncode == 0, res.stderr
    stats = json.loads(res.stdout)
    assert stats["documents"] == len(TOPICS) and stats["problems"] == []
    res = plm("query", "token rotation", "-c", str(setup["config"]), "--index", str(setup["index"]))
    assert res.returncode == 0 and "1. " in res.stdout and "Token Rotation Policy" in res.stdout  # title shown


def test_status_with_a_config_shows_the_local_index(setup: dict[str, Any]) -> None:
    res = plm("status", "--config", str(setup["config"]), "--index", str(setup["index"]), "--json")
    assert res.returncode == 0, res.stderr
    stats = json.loads(res.stdout)
    assert stats["documents"] == len(TOPICS) and stats["problems"] == [] and stats["index_dir"] == str(setup["index"])
    res = plm("status", "-c", str(setup["config"]), "--index", str(setup["index"]))
    assert res.returncode == 0 and "documents: 4" in " ".join(res.stdout.split()), res.stdout
    msg = one_error(plm("status", env={"PLM_SERVER": ""}))
    assert "--config FILE" in msg and "--server URL" in msg


def test_a_bm25_only_ingest_names_no_model(setup: dict[str, Any]) -> None:
    (setup["docs"] / "new.md").write_text("# New\n\nA page about quotas. " * 3)
    res = plm("ingest", str(setup["docs"]), "-c", str(setup["config"]), "--index", str(setup["index"]))
    assert res.returncode == 0, res.stderr
    (line,) = [line for line in res.stdout.splitlines() if line.startswith("index: ")]
    assert line.endswith(f" chunks in {setup['index']}"), line  # no "(model None)"
    assert "None" not in res.stdout + res.stderr


def test_a_hit_shows_its_title_once_and_its_sources_in_one_shape(setup: dict[str, Any]) -> None:
    filler = "Tenants ask about storage limits, growth and alerts every week. " * 8
    (setup["docs"] / "quotas.md").write_text(
        f"# Disk Quotas\n\n{filler}\n\n## Per tenant limits\n\nEach tenant gets a zanzibar quota of 50 GB. {filler}\n"
    )
    job = Job.from_config(
        setup["config"], index_dir=setup["index"], settings=Settings(progress=False, data_dir=str(setup["tmp"]))
    )
    try:
        job.ingest([setup["docs"]])
        (hit,) = job.retrieve("zanzibar", k=1)
    finally:
        job.close()
    assert hit.metadata["title"] == "Disk Quotas" and hit.heading_path == ("Per tenant limits",)
    args = ("query", "zanzibar", "-k", "1", "-c", str(setup["config"]), "--index", str(setup["index"]))
    res = plm(*args, "--json")
    assert res.returncode == 0, res.stderr
    (shown,) = json.loads(res.stdout)["hits"]
    assert shown["title"] == "Disk Quotas" and shown["heading_path"] == ["Per tenant limits"]
    # One shape for each source's rank and score, in Python and in JSON: {"rank", "score"}.
    assert hit.sources == shown["sources"] == {"retrieve": {"rank": 1, "score": hit.score}}
    assert hit.sources["retrieve"]["rank"] == shown["sources"]["retrieve"]["rank"] == 1
    res = plm(*args)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Disk Quotas") == 1 and "\n   Per tenant limits\n" in res.stdout, res.stdout


@pytest.mark.slow
def test_a_users_documents_never_change_the_demo_evaluation(tmp_path: Path) -> None:
    sample = REPO / "examples" / "sample_corpus"
    config = tmp_path / "demo.toml"
    config.write_text(
        CONFIG.replace('name = "first_contact"', f'name = "demo"\ndataset = "{sample.as_posix()}"\ncorpus = ["docs"]')
    )
    env = {"PLM_DATA_DIR": str(tmp_path / "data")}
    first = plm("run", "-c", str(config), "--report", str(tmp_path / "r1.json"), env=env)
    assert first.returncode == 0, first.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("# My notes\n\nPersonal notes about disaster recovery and RPO targets. " * 3)
    assert plm("ingest", str(mine), "-c", str(config), env=env).returncode == 0  # the job's own index
    second = plm("run", "-c", str(config), "--report", str(tmp_path / "r2.json"), env=env)
    assert second.returncode == 0 and "index up to date" in second.stdout
    metrics = [json.loads((tmp_path / f"r{i}.json").read_text())["sets"][0]["metrics"] for i in (1, 2)]
    assert metrics[0] == metrics[1]


@pytest.mark.slow
def test_every_shipped_config_passes_config_check() -> None:
    from concurrent.futures import ThreadPoolExecutor

    configs = sorted((REPO / "configs").rglob("*.toml"))
    assert len(configs) >= 10
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # a process each, every core busy
        results = list(pool.map(lambda config: plm("config", "check", str(config)), configs))
    for config, res in zip(configs, results, strict=True):
        assert res.returncode == 0, (config, res.stderr)


def test_a_configs_dataset_index_under_its_old_name_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # plm run's folder was <job>-<dataset>; it is plm eval's now, <job>.<file stem>-<dataset>
    from plm_core.settings import Settings
    from plm_index.job import Job

    config = tmp_path / "variant.toml"
    config.write_text('[job]\nname = "recipe"\n[store]\nuse = "sqlite"\n[query.retrieve]\nuse = "bm25s"\n')
    data = tmp_path / "data"
    (data / "recipe-sample").mkdir(parents=True)
    settings = Settings(progress=False, data_dir=str(data))
    job = Job.from_config(config, dataset=tmp_path / "sample", settings=settings)
    assert job.index_dir == data / "recipe.variant-sample"
    err = capsys.readouterr().err
    assert f"is now {data / 'recipe.variant-sample'}" in err and f"it no longer reads {data / 'recipe-sample'}" in err
    job.index_dir.mkdir()
    Job.from_config(config, dataset=tmp_path / "sample", settings=settings)
    assert capsys.readouterr().err == ""  # said once: the new folder exists
